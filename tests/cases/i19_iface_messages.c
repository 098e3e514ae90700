/*
 * i19_iface_messages.c - issue 19, "Messages": interface and address errors
 * name what is wrong and what to do.
 *  1. COLL_SOCKET_IFNAME that matches nothing: collInvalidArgument (not "an
 *     OS call failed"), the message names the setting and lists the
 *     interfaces that exist (lo at least), from collGetUniqueId and from
 *     collCommInitRank (the tcp transport).
 *  2. COLL_SOCKET_FAMILY=AF_UNIX: collInvalidArgument naming the value.
 *  3. COLL_COMM_ID whose host does not resolve: the message says the host
 *     does not resolve (or that the name service did not answer), names the
 *     host, and does not call it "not host:port".
 *  4. COLL_COMM_ID without a port: collInvalidArgument, "is not host:port".
 *  5. collCommInitFromEnv with MASTER_ADDR that does not resolve: the same,
 *     naming MASTER_ADDR.
 * Each check runs in a forked child (settings and the tcp transport's
 * interface are read once per process). When root, the children run in a
 * private network and mount namespace whose /etc/resolv.conf is empty and
 * /etc/hosts has only localhost, so no DNS server is asked; otherwise the
 * name used, "coll-no-such-host.invalid", may reach the machine's resolver.
 * Under a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <net/if.h>

#include "coll.h"

#define NOHOST "coll-no-such-host.invalid"

static int expect(const char* what, collResult_t got, int codeOk, const char* msg, const char* must1,
                  const char* must2, const char* mustNot) {
  int ok = codeOk && (!must1 || strstr(msg, must1)) && (!must2 || strstr(msg, must2)) &&
           (!mustNot || !strstr(msg, mustNot));
  printf("%s %s: %s: %s\n", ok ? "ok  " : "FAIL", what, collGetErrorString(got), msg);
  return ok ? 0 : 1;
}

static int ifnameUniqueId(void) {
  setenv("COLL_SOCKET_IFNAME", "nosuch0", 1);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  return expect("COLL_SOCKET_IFNAME=nosuch0, collGetUniqueId", r, r == collInvalidArgument, collGetLastError(NULL),
                "COLL_SOCKET_IFNAME=nosuch0", "lo (up", NULL);
}

static int ifnameInit(void) {
  /* the id on loopback; the rank's transport then finds no interface */
  setenv("COLL_COMM_ID", "127.0.0.1:0", 1);
  setenv("COLL_SHM_DISABLE", "1", 1);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  if (r != collSuccess) return expect("collGetUniqueId on 127.0.0.1", r, 0, collGetLastError(NULL), NULL, NULL, NULL);
  setenv("COLL_SOCKET_IFNAME", "nosuch0", 1);
  setenv("COLL_TIMEOUT", "5", 1);
  collComm_t comm;
  r = collCommInitRank(&comm, 1, id, 0);
  return expect("COLL_SOCKET_IFNAME=nosuch0, collCommInitRank", r, r == collInvalidArgument,
                collGetLastError(NULL), "COLL_SOCKET_IFNAME=nosuch0", "lo (up", NULL);
}

static int family(void) {
  setenv("COLL_SOCKET_FAMILY", "AF_UNIX", 1);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  return expect("COLL_SOCKET_FAMILY=AF_UNIX", r, r == collInvalidArgument, collGetLastError(NULL),
                "COLL_SOCKET_FAMILY=AF_UNIX", "AF_INET6", NULL);
}

static int commIdDns(void) {
  setenv("COLL_COMM_ID", NOHOST ":29500", 1);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  const char* m = collGetLastError(NULL);
  int named = strstr(m, "does not resolve") || strstr(m, "did not answer");
  return expect("COLL_COMM_ID=" NOHOST ":29500", r, (r == collInvalidArgument || r == collSystemError) && named, m,
                "host '" NOHOST "'", "COLL_COMM_ID", "is not host:port");
}

static int commIdNoPort(void) {
  setenv("COLL_COMM_ID", "198.18.0.1", 1);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  return expect("COLL_COMM_ID=198.18.0.1", r, r == collInvalidArgument, collGetLastError(NULL), "is not host:port",
                "COLL_COMM_ID", NULL);
}

static int masterAddrDns(void) {
  unsetenv("COLL_COMM_ID");
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", NOHOST, 1);
  setenv("MASTER_PORT", "29500", 1);
  collComm_t comm;
  collResult_t r = collCommInitFromEnv(&comm, NULL);
  const char* m = collGetLastError(NULL);
  int named = strstr(m, "does not resolve") || strstr(m, "did not answer");
  return expect("MASTER_ADDR=" NOHOST, r, (r == collInvalidArgument || r == collSystemError) && named, m,
                "host '" NOHOST "'", "MASTER_ADDR", "is not host:port");
}

/* Root only: no DNS server to ask, lo up, a hosts file with localhost. */
static void isolate(void) {
  if (geteuid() != 0 || unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) return;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return;
  char dir[] = "/tmp/i19_iface.XXXXXX";
  if (!mkdtemp(dir)) return;
  char resolv[64], hosts[64];
  snprintf(resolv, sizeof resolv, "%s/resolv", dir);
  snprintf(hosts, sizeof hosts, "%s/hosts", dir);
  FILE* f = fopen(resolv, "w");
  if (f) fclose(f);
  f = fopen(hosts, "w");
  if (f) {
    fputs("127.0.0.1 localhost\n::1 localhost\n", f);
    fclose(f);
  }
  int ok = mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) == 0 &&
           mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0;
  unlink(resolv);
  unlink(hosts);
  rmdir(dir);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP;
    ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  if (s >= 0) close(s);
  printf("(private network and mount namespace: no DNS server%s)\n", ok ? "" : "; bind mounts failed");
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  unsetenv("COLL_SOCKET_IFNAME");
  unsetenv("COLL_SOCKET_FAMILY");
  unsetenv("COLL_COMM_ID");
  isolate();
  int (*checks[])(void) = {ifnameUniqueId, ifnameInit, family, commIdDns, commIdNoPort, masterAddrDns};
  int fails = 0;
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    pid_t p = fork();
    if (p == 0) {
      alarm(60);
      _exit(checks[i]());
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (!WIFEXITED(st)) printf("FAIL check %zu died (status %d)\n", i, st);
      fails++;
    }
  }
  printf("i19_iface_messages: %s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}
