/*
 * br45_iface_select.c - the interface choice behind BR-25 and BR-45, on
 * made-up interface lists (collSocketPickInterface: no root, no namespaces):
 *  - no override, no route: an ordinary interface before container bridges
 *    (vethf00, docker0) listed first, before loopback; bridges before lo;
 *  - the address toward the rendezvous wins (even a bridge's), except a
 *    loopback route (not passed as a hint by collSocketFindInterface);
 *  - COLL_SOCKET_IFNAME=eth9 (a prefix of eth9.7 and eth90): eth9 itself
 *    wins even when the others come first and have IPv4; =eth9 only eth9;
 *    an explicit lo is used as asked; ^ lists keep the default order;
 *  - running (carrier) before not; IPv4 before IPv6; global before
 *    link-local IPv6; COLL_SOCKET_FAMILY filters.
 * The netns scripts (br25_docker_bridge.sh, br45_hostname_loopback.sh)
 * check the same on real namespaces. Runs in milliseconds.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misc/socket.h"

#define MAXIF 16

typedef struct {
  struct ifaddrs ifa[MAXIF];
  struct sockaddr_storage addr[MAXIF];
  char name[MAXIF][IFNAMSIZ];
  int n;
} ifList;

/* Appends "name" with address ip (v4 or v6 text) and flags. */
static void add(ifList* l, const char* name, const char* ip, unsigned flags) {
  int i = l->n++;
  memset(&l->ifa[i], 0, sizeof l->ifa[i]);
  memset(&l->addr[i], 0, sizeof l->addr[i]);
  snprintf(l->name[i], IFNAMSIZ, "%s", name);
  if (strchr(ip, ':')) {
    struct sockaddr_in6* s = (struct sockaddr_in6*)&l->addr[i];
    s->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &s->sin6_addr);
  } else {
    struct sockaddr_in* s = (struct sockaddr_in*)&l->addr[i];
    s->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &s->sin_addr);
  }
  l->ifa[i].ifa_name = l->name[i];
  l->ifa[i].ifa_flags = flags;
  l->ifa[i].ifa_addr = (struct sockaddr*)&l->addr[i];
  if (i > 0) l->ifa[i - 1].ifa_next = &l->ifa[i];
}

#define UPRUN (IFF_UP | IFF_RUNNING)
#define LOOP (IFF_UP | IFF_RUNNING | IFF_LOOPBACK)

static int gFails;

/* Expects the pick to be entry `want` (-1: none). */
static void expectPick(const char* what, ifList* l, const char* spec, int fam, const char* route, int want) {
  collSockAddr r, *rp = NULL;
  if (route) {
    memset(&r, 0, sizeof r);
    if (strchr(route, ':')) {
      r.sin6.sin6_family = AF_INET6;
      inet_pton(AF_INET6, route, &r.sin6.sin6_addr);
    } else {
      r.sin.sin_family = AF_INET;
      inet_pton(AF_INET, route, &r.sin.sin_addr);
    }
    rp = &r;
  }
  const struct ifaddrs* got = collSocketPickInterface(&l->ifa[0], spec, fam, rp);
  int gi = got ? (int)(got - &l->ifa[0]) : -1;
  int ok = gi == want;
  printf("%s %-58s -> %s%s%s\n", ok ? "ok  " : "FAIL", what, gi >= 0 ? l->name[gi] : "none",
         ok ? "" : ", expected ", ok ? "" : want >= 0 ? l->name[want] : "none");
  if (!ok) gFails++;
}

int main(void) {
  ifList l;

  /* BR-45: vethf00 (same address on every host) listed before the real NIC */
  memset(&l, 0, sizeof l);
  add(&l, "lo", "127.0.0.1", LOOP);           /* 0 */
  add(&l, "vethf00", "198.19.250.1", UPRUN);  /* 1 */
  add(&l, "docker0", "198.19.17.1", UPRUN);   /* 2 */
  add(&l, "eth0", "198.18.99.1", UPRUN);      /* 3 */
  add(&l, "lo", "::1", LOOP);                 /* 4 */
  expectPick("default: ordinary NIC before bridges and lo", &l, NULL, 0, NULL, 3);
  expectPick("route to the rendezvous (198.18.99.1)", &l, NULL, 0, "198.18.99.1", 3);
  expectPick("route via a bridge address wins", &l, NULL, 0, "198.19.17.1", 2);
  expectPick("route not on any interface: default order", &l, NULL, 0, "198.18.5.5", 3);
  expectPick("COLL_SOCKET_IFNAME=docker0", &l, "docker0", 0, "198.18.99.1", 2);
  expectPick("COLL_SOCKET_IFNAME=lo (asked for)", &l, "lo", 0, "198.18.99.1", 0);
  expectPick("COLL_SOCKET_IFNAME=^eth: bridges before lo", &l, "^eth", 0, NULL, 1);
  expectPick("COLL_SOCKET_IFNAME=^eth,veth,docker: lo", &l, "^eth,veth,docker", 0, NULL, 0);
  expectPick("COLL_SOCKET_FAMILY=AF_INET6: only ::1", &l, NULL, AF_INET6, NULL, 4);
  expectPick("COLL_SOCKET_IFNAME=nosuch0: none", &l, "nosuch0", 0, NULL, -1);

  /* only bridges and lo: the bridge (NCCL: docker before lo) */
  memset(&l, 0, sizeof l);
  add(&l, "lo", "127.0.0.1", LOOP);
  add(&l, "docker0", "198.19.17.1", UPRUN);
  expectPick("bridge before loopback", &l, NULL, 0, NULL, 1);

  /* BR-45.4: an override that is a prefix of other names */
  memset(&l, 0, sizeof l);
  add(&l, "eth9.7", "198.19.7.1", UPRUN);     /* 0: VLAN, listed first, with IPv4 */
  add(&l, "eth90", "198.19.90.1", UPRUN);     /* 1 */
  add(&l, "eth9.7", "fe80::7", UPRUN);        /* 2 */
  add(&l, "eth9", "fe80::9", UPRUN);          /* 3 */
  add(&l, "eth9", "198.18.99.1", UPRUN);      /* 4 */
  expectPick("COLL_SOCKET_IFNAME=eth9: eth9 itself", &l, "eth9", 0, NULL, 4);
  expectPick("COLL_SOCKET_IFNAME==eth9", &l, "=eth9", 0, NULL, 4);
  expectPick("COLL_SOCKET_IFNAME=eth9, AF_INET6: eth9's link-local", &l, "eth9", AF_INET6, NULL, 3);
  expectPick("COLL_SOCKET_IFNAME=eth9.7,eth90: first listed match", &l, "eth9.7,eth90", 0, NULL, 0);
  expectPick("COLL_SOCKET_IFNAME=eth: first IPv4", &l, "eth", 0, NULL, 0);

  /* carrier, families, link-local, down interfaces */
  memset(&l, 0, sizeof l);
  add(&l, "eth0", "198.18.1.1", IFF_UP);      /* 0: no carrier */
  add(&l, "eth1", "fe80::1", UPRUN);          /* 1 */
  add(&l, "eth1", "2001:db8::1", UPRUN);      /* 2 */
  add(&l, "eth2", "198.18.2.1", 0);           /* 3: down */
  add(&l, "eth3", "198.18.3.1", UPRUN);       /* 4 */
  expectPick("running IPv4 before no-carrier and IPv6", &l, NULL, 0, NULL, 4);
  expectPick("AF_INET6: global before link-local", &l, NULL, AF_INET6, NULL, 2);
  expectPick("=eth2 (down): none", &l, "=eth2", 0, NULL, -1);
  expectPick("eth0,eth1, AF_INET: eth0 even without carrier", &l, "eth0,eth1", AF_INET, NULL, 0);
  expectPick("eth0,eth1: running eth1 before no-carrier eth0", &l, "eth0,eth1", 0, NULL, 2);
  expectPick("route to eth1's IPv6 address", &l, NULL, 0, "2001:db8::1", 2);

  printf("br45_iface_select: %s\n", gFails ? "FAIL" : "PASS");
  return gFails ? 1 : 0;
}
