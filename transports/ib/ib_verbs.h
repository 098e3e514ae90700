/*
 * ib_verbs.h - every libibverbs call of the ib transport goes through this
 * table of function pointers (ib_verbs.c).
 *
 * The table is filled at first use by dlopen(COLL_IB_LIB, default
 * "libibverbs.so.1") and dlsym: libcoll.so has no link-time dependency on
 * rdma-core and runs (over TCP) where it is missing. The hot-path verbs
 * (post_send, post_recv, poll_cq, req_notify_cq) are static inline calls
 * through context->ops in <infiniband/verbs.h>, which neither --wrap nor
 * LD_PRELOAD can catch; here they are table entries like the others, so a
 * unit test installs a whole fake device with collIbvSetOps (tests/unit/ibfake.c).
 * The two sysfs readers are entries too: the fake device has no sysfs.
 */
#ifndef COLL_TRANSPORT_IB_VERBS_H_
#define COLL_TRANSPORT_IB_VERBS_H_

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef struct collIbvOps {
  struct ibv_device** (*getDeviceList)(int* num);
  void (*freeDeviceList)(struct ibv_device** list);
  const char* (*getDeviceName)(struct ibv_device* dev);
  __be64 (*getDeviceGuid)(struct ibv_device* dev);
  struct ibv_context* (*openDevice)(struct ibv_device* dev);
  int (*closeDevice)(struct ibv_context* ctx);
  int (*queryDevice)(struct ibv_context* ctx, struct ibv_device_attr* attr);
  int (*queryPort)(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* attr);
  int (*queryGid)(struct ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid);
  struct ibv_pd* (*allocPd)(struct ibv_context* ctx);
  int (*deallocPd)(struct ibv_pd* pd);
  struct ibv_mr* (*regMr)(struct ibv_pd* pd, void* addr, size_t len, int access);
  /* ibv_reg_dmabuf_mr (rdma-core 34+): NULL where libibverbs lacks it. */
  struct ibv_mr* (*regDmaBufMr)(struct ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access);
  int (*deregMr)(struct ibv_mr* mr);
  struct ibv_comp_channel* (*createCompChannel)(struct ibv_context* ctx);
  int (*destroyCompChannel)(struct ibv_comp_channel* ch);
  struct ibv_cq* (*createCq)(struct ibv_context* ctx, int cqe, void* cqContext, struct ibv_comp_channel* ch,
                             int vector);
  int (*destroyCq)(struct ibv_cq* cq);
  int (*reqNotifyCq)(struct ibv_cq* cq, int solicitedOnly);
  int (*getCqEvent)(struct ibv_comp_channel* ch, struct ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(struct ibv_cq* cq, unsigned int n);
  int (*pollCq)(struct ibv_cq* cq, int n, struct ibv_wc* wc);
  struct ibv_qp* (*createQp)(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);
  int (*modifyQp)(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask);
  int (*destroyQp)(struct ibv_qp* qp);
  int (*postSend)(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad);
  int (*postRecv)(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad);
  int (*getAsyncEvent)(struct ibv_context* ctx, struct ibv_async_event* ev);
  void (*ackAsyncEvent)(struct ibv_async_event* ev);
  /* Reads /sys/class/infiniband/<dev>/<rel> into buf (NUL-terminated,
   * trailing newline removed); 0 or -1. */
  int (*readSysfs)(const char* dev, const char* rel, char* buf, size_t len);
  /* realpath of /sys/class/infiniband/<dev>/device (the PCI function), or -1. */
  int (*pciPath)(const char* dev, char* buf, size_t len);
} collIbvOps;

/* The table, loaded once (thread-safe). Errors: collSystemError naming the
 * library and what to install when it cannot be loaded or lacks a symbol
 * (the message is kept: every later call fails the same way). */
collResult_t collIbvGet(const collIbvOps** ops);
/* Replaces the table (NULL: back to the dlopen'ed one at the next
 * collIbvGet). For tests; not thread-safe against concurrent verbs use. */
void collIbvSetOps(const collIbvOps* ops);

/* Names of a work-completion status and an async event (our own tables, so
 * they work with any table). */
const char* collIbvWcStatusStr(enum ibv_wc_status s);
const char* collIbvEventStr(enum ibv_event_type e);

#endif
