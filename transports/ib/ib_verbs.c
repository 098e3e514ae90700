/*
 * ib_verbs.c - the libibverbs table (ib_verbs.h): dlopen at first use, our
 * own wrappers for the inline verbs, status and event names.
 */
#include "ib_verbs.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misc/log.h"
#include "misc/param.h"

static pthread_mutex_t ibvLock = PTHREAD_MUTEX_INITIALIZER;
static collIbvOps ibvLoaded;
static int ibvState; /* 0 not tried, 1 loaded, -1 failed */
static char ibvError[512];
static const collIbvOps* ibvOverride;

/* The real ibv_query_port; ibvQueryPort prefers the extended op as the inline
 * ___ibv_query_port of verbs.h does (without a link-time reference). */
static int (*ibvQueryPortSym)(struct ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
static int ibvQueryPort(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* attr) {
  struct verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  memset(attr, 0, sizeof *attr);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof *attr);
  return ibvQueryPortSym(ctx, port, (struct _compat_ibv_port_attr*)attr);
}

/* The inline data-path verbs, as verbs.h defines them. */
static int ibvPostSend(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  return qp->context->ops.post_send(qp, wr, bad);
}
static int ibvPostRecv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  return qp->context->ops.post_recv(qp, wr, bad);
}
static int ibvPollCq(struct ibv_cq* cq, int n, struct ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }
static int ibvReqNotifyCq(struct ibv_cq* cq, int solicitedOnly) {
  return cq->context->ops.req_notify_cq(cq, solicitedOnly);
}

static int ibvReadSysfs(const char* dev, const char* rel, char* buf, size_t len) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/%s", dev, rel);
  FILE* f = fopen(path, "re");
  if (!f) return -1;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
  return 0;
}

static int ibvPciPath(const char* dev, char* buf, size_t len) {
  char path[PATH_MAX], real[PATH_MAX];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/device", dev);
  if (!realpath(path, real) || strlen(real) >= len) return -1;
  snprintf(buf, len, "%s", real);
  return 0;
}

/* Resolves one symbol: the IBVERBS_1.1 version (the ABI every rdma-core
 * since 2016 keeps), else the default one. */
static void* ibvSym(void* h, const char* name) {
  void* p = dlvsym(h, name, "IBVERBS_1.1");
  return p ? p : dlsym(h, name);
}

static void ibvLoad(void) {
  const char* lib = collParamStr(COLL_SPARAM_IB_LIB);
  if (!lib) lib = "libibverbs.so.1";
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(ibvError, sizeof ibvError,
             "ib: cannot load %s (%s): install rdma-core's libibverbs1 and a provider (ibverbs-providers), "
             "or use COLL_NET=tcp", lib, dlerror());
    ibvState = -1;
    return;
  }
  collIbvOps* o = &ibvLoaded;
  const char* missing = NULL;
#define IBV_SYM(field, name)                                           \
  do {                                                                 \
    *(void**)(&o->field) = ibvSym(h, name);                            \
    if (!o->field && !missing) missing = name;                         \
  } while (0)
  IBV_SYM(getDeviceList, "ibv_get_device_list");
  IBV_SYM(freeDeviceList, "ibv_free_device_list");
  IBV_SYM(getDeviceName, "ibv_get_device_name");
  IBV_SYM(getDeviceGuid, "ibv_get_device_guid");
  IBV_SYM(openDevice, "ibv_open_device");
  IBV_SYM(closeDevice, "ibv_close_device");
  IBV_SYM(queryDevice, "ibv_query_device");
  IBV_SYM(queryGid, "ibv_query_gid");
  IBV_SYM(allocPd, "ibv_alloc_pd");
  IBV_SYM(deallocPd, "ibv_dealloc_pd");
  IBV_SYM(regMr, "ibv_reg_mr");
  IBV_SYM(deregMr, "ibv_dereg_mr");
  IBV_SYM(createCompChannel, "ibv_create_comp_channel");
  IBV_SYM(destroyCompChannel, "ibv_destroy_comp_channel");
  IBV_SYM(createCq, "ibv_create_cq");
  IBV_SYM(destroyCq, "ibv_destroy_cq");
  IBV_SYM(getCqEvent, "ibv_get_cq_event");
  IBV_SYM(ackCqEvents, "ibv_ack_cq_events");
  IBV_SYM(createQp, "ibv_create_qp");
  IBV_SYM(modifyQp, "ibv_modify_qp");
  IBV_SYM(destroyQp, "ibv_destroy_qp");
  IBV_SYM(getAsyncEvent, "ibv_get_async_event");
  IBV_SYM(ackAsyncEvent, "ibv_ack_async_event");
#undef IBV_SYM
  /* optional: older rdma-core has no dma-buf registration (then NULL) */
  *(void**)(&o->regDmaBufMr) = dlsym(h, "ibv_reg_dmabuf_mr");
  *(void**)(&ibvQueryPortSym) = ibvSym(h, "ibv_query_port");
  if (!ibvQueryPortSym && !missing) missing = "ibv_query_port";
  if (missing) {
    snprintf(ibvError, sizeof ibvError, "ib: %s has no symbol %s (rdma-core too old?)", lib, missing);
    dlclose(h);
    ibvState = -1;
    return;
  }
  o->queryPort = ibvQueryPort;
  o->postSend = ibvPostSend;
  o->postRecv = ibvPostRecv;
  o->pollCq = ibvPollCq;
  o->reqNotifyCq = ibvReqNotifyCq;
  o->readSysfs = ibvReadSysfs;
  o->pciPath = ibvPciPath;
  ibvState = 1; /* the library stays loaded for the life of the process */
  COLL_INFO(COLL_SUB_NET, "ib: loaded %s", lib);
}

collResult_t collIbvGet(const collIbvOps** ops) {
  pthread_mutex_lock(&ibvLock);
  if (ibvOverride) {
    *ops = ibvOverride;
    pthread_mutex_unlock(&ibvLock);
    return collSuccess;
  }
  if (ibvState == 0) ibvLoad();
  int ok = ibvState == 1;
  pthread_mutex_unlock(&ibvLock);
  if (!ok) {
    *ops = NULL;
    return collSetError(collSystemError, "%s", ibvError);
  }
  *ops = &ibvLoaded;
  return collSuccess;
}

void collIbvSetOps(const collIbvOps* ops) {
  pthread_mutex_lock(&ibvLock);
  ibvOverride = ops;
  pthread_mutex_unlock(&ibvLock);
}

const char* collIbvWcStatusStr(enum ibv_wc_status s) {
  static const char* const names[] = {
      [IBV_WC_SUCCESS] = "success", [IBV_WC_LOC_LEN_ERR] = "local length error",
      [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error", [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
      [IBV_WC_LOC_PROT_ERR] = "local protection error", [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
      [IBV_WC_MW_BIND_ERR] = "memory management operation error", [IBV_WC_BAD_RESP_ERR] = "bad response error",
      [IBV_WC_LOC_ACCESS_ERR] = "local access error", [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
      [IBV_WC_REM_ACCESS_ERR] = "remote access error", [IBV_WC_REM_OP_ERR] = "remote operation error",
      [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded", [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
      [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error", [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
      [IBV_WC_REM_ABORT_ERR] = "aborted error", [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
      [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state", [IBV_WC_FATAL_ERR] = "fatal error",
      [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error", [IBV_WC_GENERAL_ERR] = "general error",
      [IBV_WC_TM_ERR] = "TM error", [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
  };
  if ((unsigned)s < sizeof names / sizeof names[0] && names[s]) return names[s];
  return "unknown";
}

const char* collIbvEventStr(enum ibv_event_type e) {
  static const char* const names[] = {
      [IBV_EVENT_CQ_ERR] = "CQ error", [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
      [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
      [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
      [IBV_EVENT_COMM_EST] = "communication established", [IBV_EVENT_SQ_DRAINED] = "send queue drained",
      [IBV_EVENT_PATH_MIG] = "path migrated", [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
      [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error", [IBV_EVENT_PORT_ACTIVE] = "port active",
      [IBV_EVENT_PORT_ERR] = "port error", [IBV_EVENT_LID_CHANGE] = "LID change",
      [IBV_EVENT_PKEY_CHANGE] = "P_Key change", [IBV_EVENT_SM_CHANGE] = "SM change",
      [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error", [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
      [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached", [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
      [IBV_EVENT_GID_CHANGE] = "GID table change", [IBV_EVENT_WQ_FATAL] = "WQ fatal",
  };
  if ((unsigned)e < sizeof names / sizeof names[0] && names[e]) return names[e];
  return "unknown event";
}
