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
 *  - every message carries a 64-bit tag chosen by the sender (the engine puts
 *    a signature of the call there); the receiver's test reports it. The
 *    transport only carries it: it never matches or reorders by tag;
 *  - report failures with the callbacks' setError (the message reaches
 *    collGetLastError and the communicator's error) and return the code.
 * Third-party transports export `collNetPlugin_v3` (a collNet_v3_t) from a
 * shared object named by COLL_NET_PLUGIN (a `collNetPlugin_v2`, a
 * collNet_v2_t, still loads: coll copies it into a v3 table whose
 * regMrDmaBuf is "not supported"). A plugin is a network transport:
 * it comes first in the list each pair of ranks picks from (before ib and
 * tcp; shm keeps the pairs inside a node) and may be asked to connect any
 * pair. coll registers the buffers it passes to a plugin's isend/irecv
 * (messages above 16 KiB) through regMr/deregMr on one of its comms, caches
 * the handles per address range, and passes them as mhandle.
 *
 * Version history: v1 had no tags, 64-byte handles, no PCI path and a bare
 * log callback. v2 had no regMrDmaBuf (and no COLL_PTR_DMABUF).
 */
#ifndef COLL_NET_H_
#define COLL_NET_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#define COLL_NET_VERSION 3
/* bytes of a listen handle (opaque to coll, sent through the bootstrap) */
#define COLL_NET_HANDLE_BYTES 128

/* Memory types of a buffer. */
#define COLL_PTR_HOST 0x1
#define COLL_PTR_CUDA 0x2
/* ptrSupport bit: the device registers GPU memory given as a dma-buf file
 * descriptor (regMrDmaBuf; Linux dma-buf, e.g. from the CUDA driver's
 * cuMemGetHandleForAddressRange), so the NIC reads and writes it directly.
 * Comes with COLL_PTR_CUDA; a ptrType argument never carries it. */
#define COLL_PTR_DMABUF 0x4

typedef struct {
  char name[64];      /* device name, e.g. "lo", "eth0", "mlx5_0" */
  int ptrSupport;     /* COLL_PTR_* this device reads/writes directly */
  double speedGbps;   /* link speed in Gbit/s, 0 if unknown */
  double latencyUs;   /* one-way latency estimate in microseconds */
  size_t maxMessage;  /* largest isend/irecv size in bytes */
  int hasPut;         /* 1 if iput is supported (one-sided RDMA) */
  char pciPath[256];  /* sysfs path of the device's PCI function ("" if none:
                         loopback, software devices): matched to the topology */
  uint64_t guid;      /* unique id of the device or port (IB port GUID, MAC),
                         0 if unknown; equal guids are the same NIC */
  int port;           /* physical port (IB), 0 if not applicable */
} collNetProperties_t;

typedef void (*collNetLogFn)(int level, const char* fmt, ...);

/* What coll hands a transport at init. Both functions are thread-safe. */
typedef struct {
  size_t size;      /* sizeof(collNetCallbacks_t) */
  /* level: 1 WARN, 2 INFO, 3 TRACE; shown per COLL_DEBUG (subsystem NET) */
  collNetLogFn log;
  /* Records the message for the error the transport returns next (on this
   * thread): it reaches collGetLastError and the communicator's error. */
  void (*setError)(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
} collNetCallbacks_t;

typedef struct collNet_v3 {
  size_t size;      /* sizeof(collNet_v3_t) */
  int version;      /* COLL_NET_VERSION */
  const char* name; /* "tcp", "ib", ... */
  collResult_t (*init)(const collNetCallbacks_t* cb);
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
  /* Registers GPU memory the process sees at [data, data + size) (bytes)
   * that a dma-buf exports: fd is the dma-buf, offset the byte offset of
   * data inside it. ptrType is COLL_PTR_CUDA. The fd stays the caller's: the
   * transport never closes it (it may dup it and close its dup once the
   * registration holds). *mhandle is released by deregMr as regMr's is.
   * Only for devices whose ptrSupport has COLL_PTR_DMABUF. Errors:
   * collInvalidUsage (this transport or device does not take dma-bufs, or
   * the user turned it off), collInvalidArgument (bad fd, range outside the
   * dma-buf, ptrType not COLL_PTR_CUDA), collSystemError (the driver refused
   * the registration); each with a message through setError. *mhandle is
   * left untouched on error. */
  collResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int ptrType,
                              uint64_t offset, int fd, void** mhandle);
  /* Non-blocking send/recv of `size` bytes; *request NULL means "retry".
   * isend's tag travels with the message. irecv's tag is what the receiver
   * expects: a transport may use it to fail early (a sender that sees the
   * receiver's expected tag), but need not compare. */
  collResult_t (*isend)(void* sendComm, const void* data, size_t size,
                        uint64_t tag, void* mhandle, void** request);
  collResult_t (*irecv)(void* recvComm, void* data, size_t size,
                        uint64_t tag, void* mhandle, void** request);
  /* Makes progress; *done = 1 when finished (request freed), *size = bytes
   * (receive: the message's length), *tag = the sender's tag (receive; the
   * posted tag for a send). size and tag may be NULL. A receive that fails
   * because the message is larger than posted sets *tag to the sender's tag
   * (so the engine can name the mismatched call); other failures leave *tag
   * untouched. */
  collResult_t (*test)(void* request, int* done, size_t* size, uint64_t* tag);
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
} collNet_v3_t;

/* The table coll's core uses: the current version. */
typedef collNet_v3_t collNet_t;

/* Version 2 of the table (collNetPlugin_v2): v3 without regMrDmaBuf. Only
 * the plugin loader and plugins still built against v2 use it. */
typedef struct collNet_v2 {
  size_t size;      /* sizeof(collNet_v2_t) */
  int version;      /* 2 */
  const char* name; /* "tcp", "ib", ... */
  collResult_t (*init)(const collNetCallbacks_t* cb);
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
  /* Non-blocking send/recv of `size` bytes; *request NULL means "retry".
   * isend's tag travels with the message. irecv's tag is what the receiver
   * expects: a transport may use it to fail early (a sender that sees the
   * receiver's expected tag), but need not compare. */
  collResult_t (*isend)(void* sendComm, const void* data, size_t size,
                        uint64_t tag, void* mhandle, void** request);
  collResult_t (*irecv)(void* recvComm, void* data, size_t size,
                        uint64_t tag, void* mhandle, void** request);
  /* Makes progress; *done = 1 when finished (request freed), *size = bytes
   * (receive: the message's length), *tag = the sender's tag (receive; the
   * posted tag for a send). size and tag may be NULL. A receive that fails
   * because the message is larger than posted sets *tag to the sender's tag
   * (so the engine can name the mismatched call); other failures leave *tag
   * untouched. */
  collResult_t (*test)(void* request, int* done, size_t* size, uint64_t* tag);
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
} collNet_v2_t;

#endif
