/*
 * ib_devices.c - HCAs and ports: which are used (ACTIVE, InfiniBand or
 * Ethernet link layer, COLL_IB_HCA), their addressing (LID; RoCE GID index
 * from the GID table and sysfs gid_attrs/types), speed, PCI path, GUID.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ib_internal.h"
#include "misc/log.h"

/* ---- COLL_IB_HCA: [^][=]name[:port],... (NCCL_IB_HCA without rails) ------ */

int collIbHcaMatch(const char* spec, const char* dev, int port) {
  if (!spec || !*spec) return 1;
  int exclude = 0, exact = 0;
  if (*spec == '^') { exclude = 1; spec++; }
  if (*spec == '=') { exact = 1; spec++; }
  int hit = 0;
  while (*spec && !hit) {
    const char* end = strchr(spec, ',');
    size_t n = end ? (size_t)(end - spec) : strlen(spec);
    char item[128];
    if (n >= sizeof item) n = sizeof item - 1;
    memcpy(item, spec, n);
    item[n] = 0;
    spec += n + (end ? 1 : 0);
    char* colon = strchr(item, ':');
    int want = -1;
    if (colon) {
      *colon = 0;
      if (colon[1] >= '0' && colon[1] <= '9') want = atoi(colon + 1); /* "name::rail" (NCCL syntax): any port */
    }
    if (!item[0]) continue;
    int nameOk = exact ? strcmp(item, dev) == 0 : strncmp(item, dev, strlen(item)) == 0;
    if (nameOk && (want < 0 || want == port)) hit = 1;
  }
  return exclude ? !hit : hit;
}

/* ---- GIDs ----------------------------------------------------------------- */

static int gidZero(const uint8_t* g) {
  for (int i = 0; i < 16; i++)
    if (g[i]) return 0;
  return 1;
}
static int gidV4Mapped(const uint8_t* g) {
  for (int i = 0; i < 10; i++)
    if (g[i]) return 0;
  return g[10] == 0xff && g[11] == 0xff && (g[12] | g[13] | g[14] | g[15]) != 0;
}
static int gidLinkLocal(const uint8_t* g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }
static int gidV2(const collIbGidEntry* e) { return strcmp(e->type, "RoCE v2") == 0; }

int collIbChooseGid(const collIbGidEntry* g, int n, int forced, char* why, size_t whyLen) {
  if (forced >= 0) {
    if (forced >= n) {
      snprintf(why, whyLen, "COLL_IB_GID_INDEX=%d is beyond the GID table (%d entries)", forced, n);
      return -1;
    }
    snprintf(why, whyLen, "COLL_IB_GID_INDEX=%d", forced);
    return forced;
  }
  for (int i = 0; i < n; i++)
    if (gidV2(&g[i]) && gidV4Mapped(g[i].raw)) {
      snprintf(why, whyLen, "first RoCE v2 GID with an IPv4 address");
      return i;
    }
  for (int i = 0; i < n; i++)
    if (gidV2(&g[i]) && !gidZero(g[i].raw) && !gidLinkLocal(g[i].raw)) {
      snprintf(why, whyLen, "first RoCE v2 GID with a global IPv6 address (no IPv4 one)");
      return i;
    }
  for (int i = 0; i < n; i++)
    if (gidV2(&g[i]) && !gidZero(g[i].raw)) {
      snprintf(why, whyLen, "first RoCE v2 GID (link-local only)");
      return i;
    }
  snprintf(why, whyLen, "no RoCE v2 GID: index 0");
  return 0;
}

const char* collIbGidStr(const uint8_t* gid, char* buf, size_t len) {
  if (gidV4Mapped(gid)) {
    snprintf(buf, len, "::ffff:%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
  } else if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len)) {
    snprintf(buf, len, "?");
  }
  return buf;
}

/* ---- speed ------------------------------------------------------------------ */

double collIbPortGbps(int width, int speed) {
  int lanes = width == 1 ? 1 : width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : width == 16 ? 2 : 0;
  double g = speed == 1 ? 2.5 : speed == 2 ? 5 : speed == 4 ? 10 : speed == 8 ? 10 : speed == 16 ? 14
           : speed == 32 ? 25 : speed == 64 ? 50 : speed == 128 ? 100 : speed == 256 ? 200 : 0;
  return lanes * g;
}

const char* collIbMtuStr(int mtu) {
  static const char* const s[] = {"?", "256", "512", "1024", "2048", "4096"};
  return mtu >= 1 && mtu <= 5 ? s[mtu] : "?";
}

/* ---- opening -------------------------------------------------------------- */

static void epAdd(int fd, void* cookie) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cookie};
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  if (epoll_ctl(collIb.epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
    COLL_WARN(COLL_SUB_NET, "ib: epoll_ctl(ADD, fd %d) failed: %s", fd, strerror(errno));
}

/* Chooses the RoCE GID of dev; -1 with the reason set as the error. */
static collResult_t chooseGid(collIbDev* d, const struct ibv_port_attr* pa) {
  const collIbvOps* v = collIb.v;
  collIbGidEntry g[IB_MAX_GIDS];
  int n = pa->gid_tbl_len < IB_MAX_GIDS ? pa->gid_tbl_len : IB_MAX_GIDS;
  memset(g, 0, sizeof g);
  for (int i = 0; i < n; i++) {
    union ibv_gid gid;
    if (v->queryGid(d->hca->ctx, (uint8_t)d->port, i, &gid) != 0) continue;
    memcpy(g[i].raw, gid.raw, 16);
    char rel[96];
    snprintf(rel, sizeof rel, "ports/%d/gid_attrs/types/%d", d->port, i);
    if (gidZero(g[i].raw) || v->readSysfs(d->name, rel, g[i].type, sizeof g[i].type) != 0) g[i].type[0] = 0;
  }
  char why[160];
  int idx = collIbChooseGid(g, n, collIbCfg.gidIndex, why, sizeof why);
  if (idx < 0) return collSetError(collInvalidArgument, "ib: %s:%d: %s", d->name, d->port, why);
  d->gidIndex = idx;
  memcpy(d->gid.raw, g[idx].raw, 16);
  char gs[64];
  COLL_INFO(COLL_SUB_NET, "ib: %s:%d GID index %d %s (%s; %s)", d->name, d->port, idx,
            collIbGidStr(d->gid.raw, gs, sizeof gs), g[idx].type[0] ? g[idx].type : "type unknown", why);
  return collSuccess;
}

/* Adds the ACTIVE, selected ports of one opened HCA. */
static collResult_t addPorts(collIbHca* h, struct ibv_device* dev) {
  const collIbvOps* v = collIb.v;
  for (int p = 1; p <= h->attr.phys_port_cnt && collIb.ndev < IB_MAX_DEVS; p++) {
    struct ibv_port_attr pa;
    if (v->queryPort(h->ctx, (uint8_t)p, &pa) != 0) {
      COLL_INFO(COLL_SUB_NET, "ib: %s:%d: ibv_query_port failed: %s", h->name, p, strerror(errno));
      continue;
    }
    int ll = pa.link_layer == IBV_LINK_LAYER_UNSPECIFIED ? IBV_LINK_LAYER_INFINIBAND : pa.link_layer;
    if (pa.state != IBV_PORT_ACTIVE || (ll != IBV_LINK_LAYER_INFINIBAND && ll != IBV_LINK_LAYER_ETHERNET)) {
      COLL_INFO(COLL_SUB_NET, "ib: %s:%d skipped (state %d, link layer %d)", h->name, p, pa.state, pa.link_layer);
      continue;
    }
    if (!collIbHcaMatch(collIbCfg.hca, h->name, p)) {
      COLL_INFO(COLL_SUB_NET, "ib: %s:%d not selected by COLL_IB_HCA=%s", h->name, p, collIbCfg.hca);
      continue;
    }
    collIbDev* d = &collIb.devs[collIb.ndev];
    memset(d, 0, sizeof *d);
    d->hca = h;
    memcpy(d->name, h->name, sizeof d->name); /* both 64 bytes, NUL-terminated */
    d->port = p;
    d->linkLayer = ll;
    d->mtu = pa.active_mtu;
    d->lid = pa.lid;
    d->maxMsg = pa.max_msg_sz ? pa.max_msg_sz : (1u << 30);
    d->gbps = collIbPortGbps(pa.active_width, pa.active_speed);
    d->guid = be64toh(v->getDeviceGuid(dev));
    if (v->pciPath(h->name, d->pciPath, sizeof d->pciPath) != 0) d->pciPath[0] = 0;
    if (ll == IBV_LINK_LAYER_ETHERNET) {
      collResult_t r = chooseGid(d, &pa);
      if (r != collSuccess) return r;
    }
    COLL_INFO(COLL_SUB_NET, "ib: [%d] %s:%d/%s speed %.0f Gbit/s mtu %s lid %u max message %u pci %s", collIb.ndev,
              d->name, p, ll == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", d->gbps, collIbMtuStr(d->mtu), d->lid,
              d->maxMsg, d->pciPath[0] ? d->pciPath : "-");
    collIb.ndev++;
  }
  return collSuccess;
}

static int regCb(void* ctx, void* addr, size_t len, int access, void** handle) {
  collIbHca* h = ctx;
  struct ibv_mr* mr = collIb.v->regMr(h->pd, addr, len, access);
  if (!mr) return errno ? errno : EINVAL;
  *handle = mr;
  return 0;
}
static void deregCb(void* ctx, void* handle) {
  (void)ctx;
  collIb.v->deregMr(handle);
}

static void closeHca(collIbHca* h) {
  const collIbvOps* v = collIb.v;
  if (h->reg) collRegCacheDestroy(h->reg);
  if (h->regDirect) collRegCacheDestroy(h->regDirect);
  if (h->chan) {
    epoll_ctl(collIb.epfd, EPOLL_CTL_DEL, h->chan->fd, NULL);
    v->destroyCompChannel(h->chan);
  }
  if (h->ctx) epoll_ctl(collIb.epfd, EPOLL_CTL_DEL, h->ctx->async_fd, NULL);
  if (h->pd) v->deallocPd(h->pd);
  if (h->ctx) v->closeDevice(h->ctx);
  memset(h, 0, sizeof *h);
}

collResult_t collIbDiscover(void) {
  const collIbvOps* v = collIb.v;
  int n = 0;
  struct ibv_device** list = v->getDeviceList(&n);
  if (!list) {
    int e = errno;
    if (e == ENOSYS) /* libibverbs' answer when the kernel exposes no RDMA devices */
      return collSetError(collSystemError, "ib: no RDMA device: the kernel has no InfiniBand/RoCE support loaded "
                                           "(ibv_get_device_list: %s; /sys/class/infiniband is empty or missing; "
                                           "COLL_NET=tcp uses sockets)",
                          strerror(e));
    return collSetError(collSystemError, "ib: ibv_get_device_list failed: %s", strerror(e));
  }
  collResult_t r = collSuccess;
  char found[256] = ""; /* the devices' names, for the message when none is usable */
  for (int i = 0; i < n; i++) {
    const char* name = v->getDeviceName(list[i]);
    size_t o = strlen(found);
    snprintf(found + o, sizeof found - o, "%s%s", o ? ", " : "", name ? name : "?");
  }
  for (int i = 0; i < n && collIb.nhca < IB_MAX_HCAS && r == collSuccess; i++) {
    const char* name = v->getDeviceName(list[i]);
    collIbHca* h = &collIb.hcas[collIb.nhca];
    memset(h, 0, sizeof *h);
    h->epKind[0] = IB_EP_CHAN;
    h->epKind[1] = IB_EP_ASYNC;
    snprintf(h->name, sizeof h->name, "%s", name ? name : "?");
    h->ctx = v->openDevice(list[i]);
    if (!h->ctx) {
      COLL_INFO(COLL_SUB_NET, "ib: cannot open %s: %s", h->name, strerror(errno));
      continue;
    }
    if (v->queryDevice(h->ctx, &h->attr) != 0 || !(h->pd = v->allocPd(h->ctx)) ||
        !(h->chan = v->createCompChannel(h->ctx))) {
      COLL_INFO(COLL_SUB_NET, "ib: %s: query/PD/completion channel failed: %s", h->name, strerror(errno));
      closeHca(h);
      continue;
    }
    int before = collIb.ndev;
    r = addPorts(h, list[i]);
    if (r != collSuccess || collIb.ndev == before) {
      closeHca(h);
      continue;
    }
    h->reg = collRegCacheCreate(regCb, deregCb, h, collIbCfg.regCache);
    h->regDirect = collRegCacheCreate(regCb, deregCb, h, 0);
    if (!h->reg || !h->regDirect) r = collSetError(collSystemError, "ib: out of memory");
    epAdd(h->chan->fd, &h->epKind[0]);
    epAdd(h->ctx->async_fd, &h->epKind[1]);
    collIb.nhca++;
  }
  v->freeDeviceList(list);
  if (r == collSuccess && collIb.ndev == 0)
    r = collSetError(collSystemError,
                     "ib: no usable port: %d device(s), none with an ACTIVE InfiniBand/RoCE port%s%s "
                     "(ibv_devinfo lists them; COLL_NET=tcp uses sockets); devices found: %s",
                     n, collIbCfg.hca ? " selected by COLL_IB_HCA=" : "", collIbCfg.hca ? collIbCfg.hca : "",
                     n ? found : "none");
  if (r != collSuccess) collIbCloseDevices();
  return r;
}

void collIbCloseDevices(void) {
  for (int i = 0; i < collIb.nhca; i++) closeHca(&collIb.hcas[i]);
  collIb.nhca = 0;
  collIb.ndev = 0;
}
