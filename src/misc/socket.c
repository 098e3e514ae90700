/*
 * socket.c - TCP socket helpers shared by the bootstrap and the tcp transport.
 *
 * Every fd made here is non-blocking and close-on-exec; connected sockets have
 * TCP_NODELAY. Blocking helpers poll in slices of at most COLL_POLL_SLICE_MS so
 * that they notice the abort flag and the deadline (collTimeNow() seconds,
 * 0 = none). Sends use MSG_NOSIGNAL: a closed peer never raises SIGPIPE.
 */
#include "socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "param.h"

#define COLL_POLL_SLICE_MS 100

/* Monotonic clock in seconds. */
double collTimeNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

socklen_t collSockAddrLen(const collSockAddr* a) {
  if (a->sa.sa_family == AF_INET) return (socklen_t)sizeof(struct sockaddr_in);
  if (a->sa.sa_family == AF_INET6) return (socklen_t)sizeof(struct sockaddr_in6);
  return 0;
}

/* "1.2.3.4:5678", "[::1]:5678" or "[fe80::1%2]:5678" (scope id) into buf. */
const char* collSockAddrStr(const collSockAddr* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (len == 0) return buf;
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(a->sin.sin_port));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof host);
    if (a->sin6.sin6_scope_id)
      snprintf(buf, len, "[%s%%%u]:%u", host, (unsigned)a->sin6.sin6_scope_id,
               (unsigned)ntohs(a->sin6.sin6_port));
    else
      snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6.sin6_port));
  } else {
    snprintf(buf, len, "<no address>");
  }
  return buf;
}

/* The peer address of a connected fd as text (for error messages). */
static const char* collPeerStr(int fd, char* buf, size_t len) {
  collSockAddr a;
  socklen_t sl = sizeof a;
  memset(&a, 0, sizeof a);
  if (getpeername(fd, &a.sa, &sl) != 0) {
    snprintf(buf, len, "fd %d (peer unknown)", fd);
    return buf;
  }
  return collSockAddrStr(&a, buf, len);
}

/* NCCL_SOCKET_IFNAME rules: "^" excludes, "=" exact names, else prefixes;
 * comma-separated list. Returns 1 if `name` is selected by `spec`. */
int collSocketIfMatch(const char* spec, const char* name) {
  if (!spec || !name) return 0;
  int exclude = 0, exact = 0;
  if (*spec == '^') { exclude = 1; spec++; }
  if (*spec == '=') { exact = 1; spec++; }
  int matched = 0;
  const char* p = spec;
  while (*p && !matched) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0) {
      if (exact) matched = strlen(name) == n && strncmp(name, p, n) == 0;
      else matched = strncmp(name, p, n) == 0;
    }
    p += n;
    if (*p == ',') p++;
  }
  return exclude ? !matched : matched;
}

/* ---- interface selection --------------------------------------------------
 * Candidates: every getifaddrs entry that is up and has an IPv4/IPv6 address
 * (of COLL_SOCKET_FAMILY's family when set), selected by COLL_SOCKET_IFNAME
 * when set. Among them, lexicographically (collSocketIfScore):
 *  1. the address this host uses to reach the rendezvous (the root hint):
 *     the source address of a route lookup toward it, unless that is a
 *     loopback address (a root on loopback says nothing about other hosts);
 *  2. with a COLL_SOCKET_IFNAME list, an entry named exactly (eth9 before
 *     eth9.7, which the prefix matches too);
 *  3. without COLL_SOCKET_IFNAME: ordinary interfaces, then container and
 *     VM bridges (docker*, veth*, virbr*, br-*, cni*, podman*, lxcbr*, lxdbr*:
 *     their addresses are often the same on every host), then loopback
 *     (NCCL: "^docker,lo", then docker, then lo);
 *  4. running (carrier) before not running;
 *  5. IPv4 before IPv6, global IPv6 before link-local;
 *  6. getifaddrs order. */

static pthread_mutex_t collRootHintMu = PTHREAD_MUTEX_INITIALIZER;
static collSockAddr collRootHint; /* sa_family 0: none */
static int collIfWarned;          /* the route warning, once per process */

void collSocketSetRootHint(const collSockAddr* root) {
  pthread_mutex_lock(&collRootHintMu);
  if (root && (root->sa.sa_family == AF_INET || root->sa.sa_family == AF_INET6)) collRootHint = *root;
  pthread_mutex_unlock(&collRootHintMu);
}

collResult_t collSocketFamily(int* fam) {
  const char* s = collParamStr(COLL_SPARAM_SOCKET_FAMILY);
  *fam = 0;
  if (!s || !*s) return collSuccess;
  if (strcasecmp(s, "AF_INET") == 0 || strcmp(s, "4") == 0) *fam = AF_INET;
  else if (strcasecmp(s, "AF_INET6") == 0 || strcmp(s, "6") == 0) *fam = AF_INET6;
  else return collSetError(collInvalidArgument, "COLL_SOCKET_FAMILY=%s: expected AF_INET or AF_INET6 (or unset)", s);
  return collSuccess;
}

static int collIsLoopback(const struct sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in*)(const void*)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr* a = &((const struct sockaddr_in6*)(const void*)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
  }
  return 0;
}

/* Same IP address (ports and scopes ignored). */
static int collSameIp(const struct sockaddr* a, const struct sockaddr* b) {
  if (a->sa_family != b->sa_family) return 0;
  if (a->sa_family == AF_INET)
    return ((const struct sockaddr_in*)(const void*)a)->sin_addr.s_addr ==
           ((const struct sockaddr_in*)(const void*)b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6*)(const void*)a)->sin6_addr,
                  &((const struct sockaddr_in6*)(const void*)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return 0;
}

/* The source address this host would use toward dst: a UDP socket's
 * connect() does the route lookup and sends nothing. 0 on success. */
static int collRouteSource(const collSockAddr* dst, collSockAddr* src) {
  collSockAddr d = *dst;
  if (d.sa.sa_family == AF_INET) d.sin.sin_port = htons(9); /* any non-zero port */
  else d.sin6.sin6_port = htons(9);
  int f = socket(d.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (f < 0) return -1;
  socklen_t sl = sizeof *src;
  memset(src, 0, sizeof *src);
  int rc = connect(f, &d.sa, collSockAddrLen(&d)) == 0 && getsockname(f, &src->sa, &sl) == 0 ? 0 : -1;
  close(f);
  return rc;
}

/* Container and VM bridge interfaces: last before loopback by default. */
static int collIfBridge(const char* name) {
  static const char* const pre[] = {"docker", "veth", "virbr", "br-", "cni", "podman", "lxcbr", "lxdbr"};
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
    if (strncmp(name, pre[i], strlen(pre[i])) == 0) return 1;
  return 0;
}

/* 1 if one entry of the (non-excluding) list spec is exactly name. */
static int collIfNamedExactly(const char* spec, const char* name) {
  if (*spec == '^') return 0;
  if (*spec == '=') spec++;
  size_t len = strlen(name);
  for (const char* p = spec; *p;) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return 1;
    p += n;
    if (*p == ',') p++;
  }
  return 0;
}

int collSocketIfScore(const struct ifaddrs* ifa, const char* spec, int forceFam, const collSockAddr* routeSrc) {
  if (!ifa->ifa_addr || !ifa->ifa_name || !(ifa->ifa_flags & IFF_UP)) return -1;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return -1;
  if (forceFam && fam != forceFam) return -1;
  if (spec && *spec && !collSocketIfMatch(spec, ifa->ifa_name)) return -1;
  int explicitly = spec && *spec && spec[0] != '^';
  int onRoute = routeSrc && routeSrc->sa.sa_family && collSameIp(ifa->ifa_addr, &routeSrc->sa);
  int exact = explicitly && collIfNamedExactly(spec, ifa->ifa_name);
  int cls = 0;
  if (!explicitly) cls = (ifa->ifa_flags & IFF_LOOPBACK) ? 2 : collIfBridge(ifa->ifa_name) ? 1 : 0;
  int ll = fam == AF_INET6 &&
           IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6*)(const void*)ifa->ifa_addr)->sin6_addr);
  return (!onRoute) << 6 | (explicitly && !exact) << 5 | cls << 3 | !(ifa->ifa_flags & IFF_RUNNING) << 2 |
         (fam == AF_INET6) << 1 | ll;
}

const struct ifaddrs* collSocketPickInterface(const struct ifaddrs* list, const char* spec, int forceFam,
                                              const collSockAddr* routeSrc) {
  const struct ifaddrs* best = NULL;
  int bestScore = 1 << 20;
  for (const struct ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    int sc = collSocketIfScore(ifa, spec, forceFam, routeSrc);
    if (sc >= 0 && sc < bestScore) {
      best = ifa;
      bestScore = sc;
    }
  }
  return best;
}

/* "lo (up, 127.0.0.1, ::1), eth0 (up, no carrier, 10.0.0.2), docker0 (down)"
 * into buf: every interface once, in getifaddrs order. */
static void collListInterfaces(const struct ifaddrs* list, char* buf, size_t len) {
  size_t off = 0;
  buf[0] = 0;
  for (const struct ifaddrs* a = list; a && off + 8 < len; a = a->ifa_next) {
    if (!a->ifa_name) continue;
    const struct ifaddrs* b = list;
    while (b != a && (!b->ifa_name || strcmp(b->ifa_name, a->ifa_name) != 0)) b = b->ifa_next;
    if (b != a) continue; /* listed with its first entry */
    off += (size_t)snprintf(buf + off, len - off, "%s%s (%s%s", off ? ", " : "", a->ifa_name,
                            (a->ifa_flags & IFF_UP) ? "up" : "down",
                            (a->ifa_flags & IFF_UP) && !(a->ifa_flags & IFF_RUNNING) ? ", no carrier" : "");
    int addrs = 0;
    for (b = a; b && off + 8 < len; b = b->ifa_next) {
      if (!b->ifa_name || strcmp(b->ifa_name, a->ifa_name) != 0 || !b->ifa_addr) continue;
      int fam = b->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      char host[INET6_ADDRSTRLEN] = "?";
      inet_ntop(fam, fam == AF_INET ? (const void*)&((const struct sockaddr_in*)(const void*)b->ifa_addr)->sin_addr
                                    : (const void*)&((const struct sockaddr_in6*)(const void*)b->ifa_addr)->sin6_addr,
                host, sizeof host);
      off += (size_t)snprintf(buf + off, len - off, ", %s", host);
      addrs++;
    }
    if (!addrs && off + 8 < len) off += (size_t)snprintf(buf + off, len - off, ", no IP address");
    if (off + 2 < len) off += (size_t)snprintf(buf + off, len - off, ")");
  }
  if (off + 8 >= len && len > 4) snprintf(buf + len - 5, 5, "...");
  if (!buf[0]) snprintf(buf, len, "none");
}

static const char* collIpStr(const struct sockaddr* sa, char* buf, size_t len) {
  collSockAddr a;
  memset(&a, 0, sizeof a);
  memcpy(&a, sa, sa->sa_family == AF_INET ? sizeof a.sin : sizeof a.sin6);
  if (a.sa.sa_family == AF_INET) a.sin.sin_port = 0;
  else a.sin6.sin6_port = 0;
  collSockAddrStr(&a, buf, len);
  char* colon = strrchr(buf, ':'); /* drop the ":0" */
  if (colon) *colon = 0;
  if (buf[0] == '[') {
    memmove(buf, buf + 1, strlen(buf));
    char* close = strchr(buf, ']');
    if (close) *close = 0;
  }
  return buf;
}

/* Picks the interface address per COLL_SOCKET_IFNAME / COLL_SOCKET_FAMILY
 * and the root hint (see the comment block above). */
collResult_t collSocketFindInterface(collSockAddr* addr, char* ifname, size_t ifnameLen) {
  if (!addr) return collSetError(collInvalidArgument, "collSocketFindInterface: addr is NULL");
  const char* spec = collParamStr(COLL_SPARAM_SOCKET_IFNAME);
  if (spec && !*spec) spec = NULL;
  const char* famStr = collParamStr(COLL_SPARAM_SOCKET_FAMILY);
  int forceFam;
  collResult_t r = collSocketFamily(&forceFam);
  if (r != collSuccess) return r;
  collSockAddr hint, route;
  pthread_mutex_lock(&collRootHintMu);
  hint = collRootHint;
  pthread_mutex_unlock(&collRootHintMu);
  char hs[80] = "", rs[80] = "";
  int haveRoute = 0, hintLoop = 0;
  if (hint.sa.sa_family && (!forceFam || forceFam == hint.sa.sa_family) && collRouteSource(&hint, &route) == 0) {
    hintLoop = collIsLoopback(&route.sa); /* says nothing about other hosts */
    haveRoute = !hintLoop;
    collIpStr(&hint.sa, hs, sizeof hs);
    collIpStr(&route.sa, rs, sizeof rs);
  }
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0)
    return collSetError(collSystemError, "getifaddrs failed: %s", strerror(errno));
  const struct ifaddrs* best = collSocketPickInterface(list, spec, forceFam, haveRoute ? &route : NULL);
  if (!best) {
    char all[640];
    collListInterfaces(list, all, sizeof all);
    freeifaddrs(list);
    if (spec || forceFam)
      return collSetError(collInvalidArgument,
                          "COLL_SOCKET_IFNAME=%s COLL_SOCKET_FAMILY=%s: no interface that is up and has an address "
                          "matches; interfaces here: %s. Set COLL_SOCKET_IFNAME to one of them (a prefix list; "
                          "=NAME exact; ^ excludes) or unset it",
                          spec ? spec : "<unset>", famStr && *famStr ? famStr : "<unset>", all);
    return collSetError(collInvalidUsage,
                        "no network interface is up with an IPv4 or IPv6 address; interfaces here: %s. "
                        "Bring one up (at least lo: ip link set lo up)",
                        all);
  }
  memset(addr, 0, sizeof *addr);
  if (best->ifa_addr->sa_family == AF_INET) {
    memcpy(&addr->sin, best->ifa_addr, sizeof addr->sin);
    addr->sin.sin_port = 0;
  } else {
    memcpy(&addr->sin6, best->ifa_addr, sizeof addr->sin6);
    addr->sin6.sin6_port = 0;
    addr->sin6.sin6_flowinfo = 0;
    if (IN6_IS_ADDR_LINKLOCAL(&addr->sin6.sin6_addr) && addr->sin6.sin6_scope_id == 0)
      addr->sin6.sin6_scope_id = if_nametoindex(best->ifa_name);
  }
  if (ifname && ifnameLen) snprintf(ifname, ifnameLen, "%s", best->ifa_name);
  char s[80];
  collIpStr(best->ifa_addr, s, sizeof s);
  int onRoute = haveRoute && collSameIp(best->ifa_addr, &route.sa);
  int suspicious = (best->ifa_flags & IFF_LOOPBACK) || collIfBridge(best->ifa_name);
  if (haveRoute && !onRoute && suspicious && !__atomic_exchange_n(&collIfWarned, 1, __ATOMIC_RELAXED)) {
    const struct ifaddrs* via = list;
    while (via && !(via->ifa_addr && collSameIp(via->ifa_addr, &route.sa))) via = via->ifa_next;
    COLL_WARN(COLL_SUB_NET,
              "using interface %s address %s (COLL_SOCKET_IFNAME=%s), but this host reaches the rendezvous %s "
              "through %s (%s): ranks on other hosts may not reach %s (a %s address); if init times out, set "
              "COLL_SOCKET_IFNAME to the interface that connects the hosts",
              best->ifa_name, s, spec ? spec : "<unset>", hs, via ? via->ifa_name : "another interface", rs, s,
              (best->ifa_flags & IFF_LOOPBACK) ? "loopback" : "container or VM bridge");
  }
  char why[200];
  size_t wl = 0;
  why[0] = 0;
  if (spec) wl += (size_t)snprintf(why + wl, sizeof why - wl, "COLL_SOCKET_IFNAME=%s; ", spec);
  if (onRoute && wl < sizeof why) wl += (size_t)snprintf(why + wl, sizeof why - wl, "it reaches the rendezvous %s", hs);
  else if (wl < sizeof why)
    wl += (size_t)snprintf(why + wl, sizeof why - wl, "%s", spec ? "first match" : "first usable interface");
  if (hintLoop && wl < sizeof why) snprintf(why + wl, sizeof why - wl, "; the rendezvous is on loopback here: %s", hs);
  COLL_INFO(COLL_SUB_NET, "using interface %s address %s (%s)", best->ifa_name, s, why);
  freeifaddrs(list);
  return collSuccess;
}

/* Parses "host:port", "[v6addr]:port" or "v4addr:port". IPv4 results are
 * preferred unless COLL_SOCKET_FAMILY=AF_INET6. */
collResult_t collSocketParseAddr(const char* hostport, collSockAddr* out) {
  if (!hostport || !out)
    return collSetError(collInvalidArgument, "collSocketParseAddr: NULL argument");
  char host[256];
  const char* portStr;
  if (hostport[0] == '[') {
    const char* close = strchr(hostport, ']');
    if (!close || close[1] != ':')
      return collSetError(collInvalidArgument, "address '%s' is not [v6addr]:port", hostport);
    size_t n = (size_t)(close - hostport - 1);
    if (n == 0 || n >= sizeof host)
      return collSetError(collInvalidArgument, "address '%s': bad host part (empty or longer than %zu)", hostport,
                          sizeof host - 1);
    memcpy(host, hostport + 1, n);
    host[n] = 0;
    portStr = close + 2;
  } else {
    const char* colon = strrchr(hostport, ':');
    if (!colon || strchr(hostport, ':') != colon)
      return collSetError(collInvalidArgument, "address '%s' is not host:port (write IPv6 as [addr]:port)", hostport);
    size_t n = (size_t)(colon - hostport);
    if (n == 0 || n >= sizeof host)
      return collSetError(collInvalidArgument, "address '%s': bad host part (empty or longer than %zu)", hostport,
                          sizeof host - 1);
    memcpy(host, hostport, n);
    host[n] = 0;
    portStr = colon + 1;
  }
  char* end;
  errno = 0;
  long port = strtol(portStr, &end, 10);
  if (!*portStr || *end || errno || port < 0 || port > 65535)
    return collSetError(collInvalidArgument, "address '%s': bad port '%s' (expected 0..65535)", hostport, portStr);
  int want;
  collResult_t fr = collSocketFamily(&want);
  if (fr != collSuccess) return fr;
  if (!want) want = AF_INET;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0) {
    const char* why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
    if (rc == EAI_AGAIN || rc == EAI_SYSTEM || rc == EAI_MEMORY)
      return collSetError(collSystemError,
                          "address '%s': cannot resolve host '%s' now (%s): the name service (DNS) did not answer; "
                          "retry, or give an IP address",
                          hostport, host, why);
    return collSetError(collInvalidArgument,
                        "address '%s': host '%s' does not resolve (%s); check the name (/etc/hosts, DNS) or give "
                        "an IP address",
                        hostport, host, why);
  }
  const struct addrinfo* pick = NULL;
  for (const struct addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    if (!pick || (pick->ai_family != want && ai->ai_family == want)) pick = ai;
  }
  if (!pick) {
    freeaddrinfo(res);
    return collSetError(collInvalidArgument, "address '%s': host '%s' has no IPv4 or IPv6 address", hostport, host);
  }
  memset(out, 0, sizeof *out);
  memcpy(out, pick->ai_addr, pick->ai_addrlen <= sizeof *out ? pick->ai_addrlen : sizeof *out);
  if (out->sa.sa_family == AF_INET) out->sin.sin_port = htons((uint16_t)port);
  else out->sin6.sin6_port = htons((uint16_t)port);
  freeaddrinfo(res);
  return collSuccess;
}

/* Binds and listens on addr; writes the bound port back into addr. */
collResult_t collSocketListen(collSockAddr* addr, int* fd) {
  char s[80];
  if (!addr || !fd) return collSetError(collInvalidArgument, "collSocketListen: NULL argument");
  int f = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (f < 0)
    return collSetError(collSystemError, "socket() for %s failed: %s",
                        collSockAddrStr(addr, s, sizeof s), strerror(errno));
  int one = 1;
  (void)setsockopt(f, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(f, &addr->sa, collSockAddrLen(addr)) != 0 || listen(f, SOMAXCONN) != 0) {
    int e = errno;
    close(f);
    return collSetError(collSystemError, "bind/listen on %s failed: %s",
                        collSockAddrStr(addr, s, sizeof s), strerror(e));
  }
  socklen_t sl = sizeof *addr;
  if (getsockname(f, &addr->sa, &sl) != 0) {
    int e = errno;
    close(f);
    return collSetError(collSystemError, "getsockname on listening socket failed: %s",
                        strerror(e));
  }
  *fd = f;
  return collSuccess;
}

/* Milliseconds to poll now: at most one slice, never past the deadline.
 * Returns -1 when the deadline has passed. */
static int collSliceMs(double deadline) {
  if (deadline <= 0) return COLL_POLL_SLICE_MS;
  double left = deadline - collTimeNow();
  if (left <= 0) return -1;
  return left * 1000.0 < COLL_POLL_SLICE_MS ? (int)(left * 1000.0) + 1 : COLL_POLL_SLICE_MS;
}

/* Sleeps ms milliseconds in slices, watching the abort flag. 1 = aborted. */
static int collNap(int ms, volatile int* abortFlag) {
  while (ms > 0) {
    if (abortFlag && *abortFlag) return 1;
    int s = ms < COLL_POLL_SLICE_MS ? ms : COLL_POLL_SLICE_MS;
    struct timespec ts = {0, (long)s * 1000000L};
    nanosleep(&ts, NULL);
    ms -= s;
  }
  return abortFlag && *abortFlag;
}

static void collSetNoDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connect to a local port nobody listens on can pick that same port as its
 * own ephemeral source port and then "succeed" by TCP simultaneous open onto
 * itself; the socket then blocks the real listener's bind (EADDRINUSE) and
 * reads back its own bytes. Seen with 64 ranks retrying the root's port. */
static int collSocketIsSelfConnected(int fd) {
  struct sockaddr_storage a, b;
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, (struct sockaddr*)&a, &la) != 0 || getpeername(fd, (struct sockaddr*)&b, &lb) != 0)
    return 0;
  return la == lb && memcmp(&a, &b, la) == 0;
}

/* Connects to addr, retrying ECONNREFUSED/ETIMEDOUT/EAGAIN/EADDRNOTAVAIL (and resets while
 * the listener starts; with a deadline EHOSTUNREACH/ENETUNREACH too) with a
 * 10..200 ms backoff until the deadline, which
 * gives collTimeout. With deadline 0 the retries last COLL_CONNECT_TIMEOUT_MS
 * and then give collSystemError. Other errors: collSystemError at once. */
collResult_t collSocketConnect(const collSockAddr* addr, int* fd, double deadline,
                               volatile int* abortFlag) {
  return collSocketConnectErr(addr, fd, deadline, abortFlag, NULL);
}

collResult_t collSocketConnectErr(const collSockAddr* addr, int* fd, double deadline, volatile int* abortFlag,
                                  int* lastErrno) {
  char s[80];
  if (lastErrno) *lastErrno = 0;
  if (!addr || !fd) return collSetError(collInvalidArgument, "collSocketConnect: NULL argument");
  collSockAddrStr(addr, s, sizeof s);
  double retryEnd = deadline > 0 ? deadline
                                 : collTimeNow() + (double)collParamInt(COLL_PARAM_CONNECT_RETRY_MS) * 1e-3;
  int backoff = 10, attempts = 0, err = 0;
  for (;;) {
    if (abortFlag && *abortFlag) return collSetError(collRemoteError, "connect to %s aborted", s);
    attempts++;
    int f = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (f < 0) return collSetError(collSystemError, "socket() for %s failed: %s", s, strerror(errno));
    err = 0;
    if (connect(f, &addr->sa, collSockAddrLen(addr)) != 0) err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      for (;;) { /* wait for the handshake in slices */
        if (abortFlag && *abortFlag) { close(f); return collSetError(collRemoteError, "connect to %s aborted", s); }
        int ms = collSliceMs(retryEnd);
        if (ms < 0) { err = ETIMEDOUT; break; }
        struct pollfd p = {f, POLLOUT, 0};
        int n = poll(&p, 1, ms);
        if (n < 0 && errno != EINTR) { err = errno; break; }
        if (n > 0) {
          socklen_t el = sizeof err;
          if (getsockopt(f, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
          break;
        }
      }
    }
    if (err == 0 && collSocketIsSelfConnected(f)) err = ECONNREFUSED; /* see collSocketIsSelfConnected */
    if (err == 0) {
      collSetNoDelay(f);
      *fd = f;
      return collSuccess;
    }
    close(f);
    if (lastErrno) *lastErrno = err;
    /* EADDRNOTAVAIL: no free ephemeral source port right now (a busy host,
     * or sockets in TIME_WAIT); transient like a refused connection. */
    int retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == ECONNRESET ||
                err == EADDRNOTAVAIL;
    /* with a deadline (init: the root's host may come up later, BR-38) an
     * unreachable host or network is waited for too */
    if (deadline > 0 && (err == EHOSTUNREACH || err == ENETUNREACH)) retry = 1;
    if (!retry)
      return collSetError(collSystemError, "connect to %s failed: %s", s, strerror(err));
    double left = retryEnd - collTimeNow();
    if (left > 0) { /* back off, but not past the end */
      int ms = backoff < left * 1000.0 ? backoff : (int)(left * 1000.0) + 1;
      if (collNap(ms, abortFlag)) return collSetError(collRemoteError, "connect to %s aborted", s);
      if (backoff < 200) backoff *= 2;
    }
    if (collTimeNow() >= retryEnd)
      return collSetError(deadline > 0 ? collTimeout : collSystemError,
                          "connect to %s: gave up after %d attempts (%s), last error: %s", s,
                          attempts, deadline > 0 ? "deadline passed" : "COLL_CONNECT_TIMEOUT_MS",
                          strerror(err));
  }
}

/* Accepts one connection on listenFd, waiting until the deadline. */
collResult_t collSocketAccept(int listenFd, int* fd, double deadline, volatile int* abortFlag) {
  if (!fd) return collSetError(collInvalidArgument, "collSocketAccept: fd is NULL");
  for (;;) {
    if (abortFlag && *abortFlag) return collSetError(collRemoteError, "accept on fd %d aborted", listenFd);
    int f = accept4(listenFd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (f >= 0) {
      collSetNoDelay(f);
      *fd = f;
      return collSuccess;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return collSetError(collSystemError, "accept on fd %d failed: %s", listenFd, strerror(errno));
    int ms = collSliceMs(deadline);
    if (ms < 0) return collSetError(collTimeout, "accept on fd %d: deadline passed", listenFd);
    struct pollfd p = {listenFd, POLLIN, 0};
    if (poll(&p, 1, ms) < 0 && errno != EINTR)
      return collSetError(collSystemError, "poll on listening fd %d failed: %s", listenFd, strerror(errno));
  }
}

/* One non-blocking send or recv step on fd. Returns bytes moved (> 0), 0 if
 * it would block, -1 with the error recorded (closed peer: collRemoteError). */
static ssize_t collIoStep(int fd, int isSend, char* p, size_t n, collResult_t* res) {
  char s[80];
  for (;;) {
    ssize_t r = isSend ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (r > 0) return r;
    if (r == 0 && n > 0) {
      *res = collSetError(collRemoteError, "connection to %s closed by peer",
                          collPeerStr(fd, s, sizeof s));
      return -1;
    }
    if (r == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    int e = errno;
    if (e == ECONNRESET || e == EPIPE || e == ENOTCONN)
      *res = collSetError(collRemoteError, "connection to %s broken: %s",
                          collPeerStr(fd, s, sizeof s), strerror(e));
    else
      *res = collSetError(collSystemError, "%s on connection to %s failed: %s",
                          isSend ? "send" : "recv", collPeerStr(fd, s, sizeof s), strerror(e));
    return -1;
  }
}

/* Drives up to two transfers (send on sfd, recv on rfd) to completion. */
static collResult_t collIoAll(int sfd, const char* sbuf, size_t sn, int rfd, char* rbuf,
                              size_t rn, double deadline, volatile int* abortFlag) {
  size_t so = 0, ro = 0;
  char s[80];
  while (so < sn || ro < rn) {
    if (abortFlag && *abortFlag) return collSetError(collRemoteError, "socket transfer aborted");
    collResult_t res = collSuccess;
    ssize_t a = 0, b = 0;
    if (so < sn && (a = collIoStep(sfd, 1, (char*)sbuf + so, sn - so, &res)) < 0) return res;
    if (ro < rn && (b = collIoStep(rfd, 0, rbuf + ro, rn - ro, &res)) < 0) return res;
    so += (size_t)a;
    ro += (size_t)b;
    if (a > 0 || b > 0) continue;
    int ms = collSliceMs(deadline);
    if (ms < 0)
      return collSetError(collTimeout, "socket transfer with %s: deadline passed (%zu/%zu sent, %zu/%zu received)",
                          collPeerStr(so < sn ? sfd : rfd, s, sizeof s), so, sn, ro, rn);
    struct pollfd p[2];
    int np = 0;
    if (so < sn) p[np++] = (struct pollfd){sfd, POLLOUT, 0};
    if (ro < rn) p[np++] = (struct pollfd){rfd, POLLIN, 0};
    if (poll(p, (nfds_t)np, ms) < 0 && errno != EINTR)
      return collSetError(collSystemError, "poll failed: %s", strerror(errno));
  }
  return collSuccess;
}

collResult_t collSocketSendAll(int fd, const void* buf, size_t n, double deadline,
                               volatile int* abortFlag) {
  return collIoAll(fd, buf, n, -1, NULL, 0, deadline, abortFlag);
}

collResult_t collSocketRecvAll(int fd, void* buf, size_t n, double deadline,
                               volatile int* abortFlag) {
  return collIoAll(-1, NULL, 0, fd, buf, n, deadline, abortFlag);
}

collResult_t collSocketSendRecv(int sfd, const void* sbuf, size_t sn, int rfd, void* rbuf,
                                size_t rn, double deadline, volatile int* abortFlag) {
  return collIoAll(sfd, sbuf, sn, rfd, rbuf, rn, deadline, abortFlag);
}
