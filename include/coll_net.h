/*
 * coll_net.h - the transport operations table (versioned plugin ABI).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Only point-to-point traffic goes behind this table; every algorithm runs
 * over any transport. Modelled on NCCL's net plugin: a listening endpoint
 * publishes a handle (opaque bytes that travel through coll's bootstrap), the
 * peer connects to it, the listener accepts; data moves by non-blocking
 * isend/irecv completed by test. Connections are unidirectional and ordered:
 * the k-th isend on a send comm matches the k-th irecv on the recv comm.
 *
 * Rules for implementers:
 *  - fill the table with designated initializers; an operation you lack
 *    points to a function that returns collInvalidUsage ("not supported"),
 *    never NULL;
 *  - a message larger than the size posted by irecv is an error on the
 *    receiver (collRemoteError), never a write past the buffer;
 *  - no call blocks longer than it takes to make local progress;
 *  - a closed or broken connection turns into collRemoteError from test.
 * Third-party transports export `collNetPlugin_v1` (a collNet_v1_t) from a
 * shared object named by COLL_NET_PLUGIN.
 */
#ifndef COLL_NET_H_
#define COLL_NET_H_

#include <stddef.h>

#include "coll.h"

#define COLL_NET_VERSION 1
#define COLL_NET_HANDLE_BYTES 64

/* Memory types of a buffer. */
#define COLL_PTR_HOST 0x1
#define COLL_PTR_CUDA 0x2

typedef struct {
  char name[64];      /* device name, e.g. "lo", "eth0", "mlx5_0" */
  int ptrSupport;     /* COLL_PTR_* this device reads/writes directly */
  double speedGbps;   /* link speed in Gbit/s, 0 if unknown */
  double latencyUs;   /* one-way latency estimate in microseconds */
  size_t maxMessage;  /* largest isend/irecv size in bytes */
  int hasPut;         /* 1 if iput is supported (one-sided RDMA) */
} collNetProperties_t;

typedef void (*collNetLogFn)(int level, const char* fmt, ...);

typedef struct collNet_v1 {
  size_t size;      /* sizeof(collNet_v1_t) */
  int version;      /* COLL_NET_VERSION */
  const char* name; /* "tcp", "ib", ... */
  collResult_t (*init)(collNetLogFn log);
  collResult_t (*devices)(int* ndev);
  collResult_t (*getProperties)(int dev, collNetProperties_t* props);
  /* Opens a listening endpoint on dev; writes COLL_NET_HANDLE_BYTES to handle. */
  collResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Connects to a handle. May complete later: *sendComm stays NULL until it
   * does, call again with the same arguments. */
  collResult_t (*connect)(int dev, const void* handle, void** sendComm);
  /* Accepts one pending connection; *recvComm stays NULL if none yet. */
  collResult_t (*accept)(void* listenComm, void** recvComm);
  collResult_t (*regMr)(void* comm, void* data, size_t size, int ptrType,
                        void** mhandle);
  collResult_t (*deregMr)(void* comm, void* mhandle);
  /* Non-blocking send/recv of `size` bytes; *request NULL means "retry". */
  collResult_t (*isend)(void* sendComm, const void* data, size_t size,
                        void* mhandle, void** request);
  collResult_t (*irecv)(void* recvComm, void* data, size_t size,
                        void* mhandle, void** request);
  /* Makes progress; *done = 1 when finished (request freed), *size = bytes. */
  collResult_t (*test)(void* request, int* done, size_t* size);
  /* One-sided write into a peer's registered memory (RDMA); optional. */
  collResult_t (*iput)(void* sendComm, const void* data, size_t size,
                       void* mhandle, unsigned long long remoteAddr,
                       unsigned long long remoteKey, void** request);
  /* Makes received data visible to a GPU (GPUDirect); host: no-op. */
  collResult_t (*iflush)(void* recvComm, void* data, size_t size,
                         void* mhandle, void** request);
  /* A file descriptor poll() can wait on for this comm (POLLIN for recv,
   * POLLOUT for send), or -1 if the transport has none. */
  collResult_t (*getPollFd)(void* comm, int* fd);
  collResult_t (*closeSend)(void* sendComm);
  collResult_t (*closeRecv)(void* recvComm);
  collResult_t (*closeListen)(void* listenComm);
  collResult_t (*fini)(void);
} collNet_v1_t;

#endif
