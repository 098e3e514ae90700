/*
 * ibfake.h - an in-memory verbs device for the ib transport's unit tests,
 * installed as the transport's verbs table (collIbvSetOps).
 *
 * It implements what the transport uses: devices, ports, GID tables and
 * their sysfs types, PDs, MRs (keys checked on every access), completion
 * channels (eventfds, so poll/epoll work), CQs with arming, RC QPs with the
 * RESET/INIT/RTR/RTS/ERR state machine (required attribute masks, MTU no
 * larger than the port's, RoCE needs a GRH), RDMA write and write with
 * immediate, receive WRs, async events. Work requests are queued when posted
 * and executed later, in order, when any CQ is polled: the source is read
 * then (as an HCA may), the destination QP must be connected back to the
 * source with matching PSNs and reachable GID/LID, else the request fails
 * with IBV_WC_RETRY_EXC_ERR, and a failure moves the QP to ERR (flushing the
 * rest). Thread-safe (one lock).
 */
#ifndef COLL_TESTS_IBFAKE_H_
#define COLL_TESTS_IBFAKE_H_

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define IBFAKE_MAX_GIDS 8

typedef struct {
  uint8_t raw[16];
  const char* type;  /* sysfs gid_attrs/types text */
  int unroutable;    /* packets from/to this GID never arrive (e.g. link-local across subnets) */
} ibFakeGid;

typedef struct {
  enum ibv_port_state state;
  uint8_t linkLayer; /* IBV_LINK_LAYER_* */
  enum ibv_mtu mtu;
  uint8_t width, speed; /* ibv_port_attr active_width / active_speed codes */
  uint32_t maxMsg;
  uint16_t lid;
  int ngids;
  ibFakeGid gids[IBFAKE_MAX_GIDS];
} ibFakePort;

typedef struct {
  const char* name;
  uint64_t guid;
  const char* pci; /* NULL: none */
  int nports;
  ibFakePort ports[2];
} ibFakeDevSpec;

/* Installs devices (copied) and resets every object and counter. */
void ibFakeInstall(const ibFakeDevSpec* devs, int n);
/* Removes the table (back to the real libibverbs). */
void ibFakeUninstall(void);
/* A RoCE port like rxe's on 198.18.0.<host>: GID 0 link-local, 1 IPv4, both "RoCE v2". */
ibFakePort ibFakeRocePort(int host, enum ibv_mtu mtu);
/* A device like rxe's: one ibFakeRocePort(host, mtu), guid 0x02..00<host>, no PCI path. */
ibFakeDevSpec ibFakeRxe(const char* name, int host, enum ibv_mtu mtu);
/* An InfiniBand port with LID lid (4x EDR). */
ibFakePort ibFakeIbPort(uint16_t lid, enum ibv_mtu mtu);

/* ibv_reg_dmabuf_mr of the fake (reset to SUPPORTED by ibFakeInstall):
 * SUPPORTED maps the fd (RDMA through the MR lands in the memory behind it),
 * UNSUPPORTED fails every call with EOPNOTSUPP (a kernel driver without
 * dma-buf), ABSENT removes the entry (libibverbs older than rdma-core 34).
 * Call before the transport starts (it probes once per device). */
enum { IBFAKE_DMABUF_SUPPORTED = 0, IBFAKE_DMABUF_UNSUPPORTED = 1, IBFAKE_DMABUF_ABSENT = 2 };
void ibFakeDmaBuf(int mode);

/* While held (1), posted work requests wait; 0 runs them (in posting order)
 * at the next poll. */
void ibFakeHold(int hold);
/* The next `count` send WRs to execute fail with `status`. */
void ibFakeFailSends(enum ibv_wc_status status, int count);
/* Raises an async event: for QP events on qpn, for port events on port of dev. */
void ibFakeAsyncEvent(int dev, enum ibv_event_type type, uint32_t qpn, int port);

typedef struct {
  int state;
  int port;
  struct ibv_qp_attr rtr, rts; /* attributes of the last transitions */
  uint32_t writes, records;    /* RDMA writes executed (with immediate: records) */
  int maxSendWr, maxRecvWr;
} ibFakeQpInfo;
/* 0 and the QP's state, or -1 if qpn does not exist (any more). */
int ibFakeGetQp(uint32_t qpn, ibFakeQpInfo* out);

typedef struct {
  uint64_t regs, deregs;      /* ibv_reg_mr / ibv_dereg_mr calls */
  uint64_t dmabufRegs;        /* ibv_reg_dmabuf_mr calls (the probe's too) */
  uint64_t writes, imms;      /* executed RDMA writes, of which with immediate */
  uint64_t maxWrite;          /* largest single write in bytes */
  uint64_t rnr;               /* write-with-imm retried: no receive posted */
  uint64_t cqEvents, acks;    /* completion events raised / acknowledged */
  uint64_t sendCqes;          /* successful send completions queued (signaled WRs) */
  int liveQps, liveMrs, liveCqs;
  char violation[256];        /* first misuse of the verbs API seen ("" if none) */
} ibFakeStats;
void ibFakeGetStats(ibFakeStats* st);

#endif
