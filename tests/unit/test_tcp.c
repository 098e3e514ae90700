/*
 * test_tcp.c - socket helpers and the tcp transport over loopback only.
 *
 * COLL_SOCKET_IFNAME=lo is set first thing in main. Parameters are cached
 * once per process, so the COLL_NSOCKS_PERTHREAD=4 (striping) cases run in a
 * re-executed child (/proc/self/exe --stripe-child) with that variable set.
 * alarm() bounds the whole run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misc/log.h"
#include "misc/socket.h"
#include "transports/tcp/tcp.h"
#include "net_testlib.h"

static const collNet_t* N = &collNetTcp;

/* Messages k % 50 == 49 of the mix are striped when nsocks > 1. */
static const netStreamOpts_t kOpts = {200000, 0};

/* ---- socket helpers ---------------------------------------------------- */

static void test_ifmatch(void** st) {
  (void)st;
  assert_int_equal(collSocketIfMatch("eth", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("eth", "ens0"), 0);
  assert_int_equal(collSocketIfMatch("^docker", "docker0"), 0);
  assert_int_equal(collSocketIfMatch("^docker", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("=eth0", "eth0"), 1);
  assert_int_equal(collSocketIfMatch("=eth0", "eth01"), 0);
  assert_int_equal(collSocketIfMatch("=eth0", "eth"), 0);
  assert_int_equal(collSocketIfMatch("eth,ib", "ib0"), 1);
  assert_int_equal(collSocketIfMatch("eth,ib", "lo"), 0);
  assert_int_equal(collSocketIfMatch("^docker,lo", "lo"), 0);
  assert_int_equal(collSocketIfMatch("^docker,lo", "eth1"), 1);
  assert_int_equal(collSocketIfMatch("=eth0,lo", "lo"), 1);
  assert_int_equal(collSocketIfMatch("=eth0,lo", "lo1"), 0);
  assert_int_equal(collSocketIfMatch("^=eth0", "eth0"), 0);
  assert_int_equal(collSocketIfMatch("^=eth0", "eth01"), 1);
}

static void test_parse_addr(void** st) {
  (void)st;
  collSockAddr a;
  char s[80];
  assert_int_equal(collSocketParseAddr("127.0.0.1:1234", &a), collSuccess);
  assert_int_equal(a.sa.sa_family, AF_INET);
  assert_int_equal(ntohl(a.sin.sin_addr.s_addr), 0x7f000001u);
  assert_int_equal(ntohs(a.sin.sin_port), 1234);
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:1234");
  assert_int_equal(collSockAddrLen(&a), sizeof(struct sockaddr_in));
  assert_int_equal(collSocketParseAddr("[::1]:80", &a), collSuccess);
  assert_int_equal(a.sa.sa_family, AF_INET6);
  assert_true(IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
  assert_int_equal(ntohs(a.sin6.sin6_port), 80);
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "[::1]:80");
  assert_int_equal(collSockAddrLen(&a), sizeof(struct sockaddr_in6));
  assert_int_equal(collSocketParseAddr("localhost:5", &a), collSuccess); /* IPv4 preferred */
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:5");
  const char* bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:80",
                       "[::1]80", "[::1]", ":80", "127.0.0.1:8x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(collSocketParseAddr(bad[i], &a), collInvalidArgument);
  assert_int_equal(collSocketParseAddr(NULL, &a), collInvalidArgument);
}

static void test_find_interface_lo(void** st) {
  (void)st;
  collSockAddr a;
  char name[32];
  assert_int_equal(collSocketFindInterface(&a, name, sizeof name), collSuccess);
  assert_string_equal(name, "lo");
  char s[80];
  assert_string_equal(collSockAddrStr(&a, s, sizeof s), "127.0.0.1:0");
}

/* listen/connect/accept with the helpers, both-sides-send exchange, timeout,
 * abort flag and peer close. */
typedef struct { int fd; uint8_t* out; uint8_t* in; size_t n; collResult_t r; } xchg_t;
static void* xchgThread(void* arg) {
  xchg_t* x = arg;
  x->r = collSocketSendRecv(x->fd, x->out, x->n, x->fd, x->in, x->n, collTimeNow() + 30, NULL);
  return NULL;
}

static void test_socket_helpers(void** st) {
  (void)st;
  collSockAddr a;
  int lfd, cfd, afd;
  assert_int_equal(collSocketParseAddr("127.0.0.1:0", &a), collSuccess);
  assert_int_equal(collSocketListen(&a, &lfd), collSuccess);
  assert_int_not_equal(ntohs(a.sin.sin_port), 0);
  assert_int_equal(collSocketConnect(&a, &cfd, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketAccept(lfd, &afd, collTimeNow() + 5, NULL), collSuccess);
  const size_t n = 4u << 20; /* larger than the socket buffers: needs concurrency */
  xchg_t x1 = {cfd, malloc(n), malloc(n), n, collInternalError};
  xchg_t x2 = {afd, malloc(n), malloc(n), n, collInternalError};
  netFill(x1.out, n, 1);
  netFill(x2.out, n, 2);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, xchgThread, &x1), 0);
  xchgThread(&x2);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(x1.r, collSuccess);
  assert_int_equal(x2.r, collSuccess);
  assert_true(netCheck(x1.in, n, 2));
  assert_true(netCheck(x2.in, n, 1));
  uint8_t b[4];
  double t0 = collTimeNow();
  assert_int_equal(collSocketRecvAll(afd, b, 4, t0 + 0.2, NULL), collTimeout);
  assert_true(collTimeNow() - t0 >= 0.19);
  volatile int abortFlag = 1;
  assert_int_equal(collSocketRecvAll(afd, b, 4, 0, &abortFlag), collRemoteError);
  assert_int_equal(collSocketSendAll(cfd, "abcd", 4, collTimeNow() + 5, NULL), collSuccess);
  assert_int_equal(collSocketRecvAll(afd, b, 4, collTimeNow() + 5, NULL), collSuccess);
  assert_memory_equal(b, "abcd", 4);
  close(cfd);
  assert_int_equal(collSocketRecvAll(afd, b, 4, collTimeNow() + 5, NULL), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed by peer"));
  assert_non_null(strstr(collGetLastError(NULL), "127.0.0.1:"));
  close(afd);
  close(lfd);
  free(x1.out); free(x1.in); free(x2.out); free(x2.in);
}

/* A refused connection is retried until the deadline, then collTimeout. */
static void test_connect_refused_deadline(void** st) {
  (void)st;
  collSockAddr a;
  int lfd, fd = -1;
  assert_int_equal(collSocketParseAddr("127.0.0.1:0", &a), collSuccess);
  assert_int_equal(collSocketListen(&a, &lfd), collSuccess);
  close(lfd); /* the port is now closed */
  double t0 = collTimeNow();
  assert_int_equal(collSocketConnect(&a, &fd, t0 + 0.3, NULL), collTimeout);
  double dt = collTimeNow() - t0;
  assert_true(dt >= 0.29 && dt < 2.0);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(collGetLastError(NULL), "Connection refused"));
}

/* A connect to a port nobody listens on, whose only ephemeral source port is
 * that same port, "succeeds" by simultaneous open onto itself. Run in a child
 * in its own network namespace (root only; skipped otherwise) whose
 * ip_local_port_range is that one port: the connect must keep being refused
 * until its deadline, not hand back a socket talking to itself. */
static void test_connect_self_refused(void** st) {
  (void)st;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) _exit(2);
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) _exit(2);
    close(s);
    FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "w");
    if (!f || fprintf(f, "40000 40000\n") < 0 || fclose(f) != 0) _exit(77);
    collSockAddr a;
    int fd = -1;
    if (collSocketParseAddr("127.0.0.1:40000", &a) != collSuccess) _exit(2);
    collResult_t r = collSocketConnect(&a, &fd, collTimeNow() + 0.3, NULL);
    if (r == collSuccess) _exit(3); /* connected to itself */
    _exit(r == collTimeout && fd == -1 ? 0 : 4);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    print_message("skipped: needs root for a network namespace\n");
    return;
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* With a deadline, "no route to host" is waited for like a refused
 * connection (the root's host may come up later: BR-38): in a child in its
 * own network namespace with an unreachable route, the connect gives
 * collTimeout at the deadline naming the error, not an error at once. */
static void test_connect_unreachable_waits(void** st) {
  (void)st;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    if (system("ip link set lo up && ip route add unreachable 198.18.5.5/32") != 0) _exit(77);
    collSockAddr a;
    int fd = -1;
    if (collSocketParseAddr("198.18.5.5:40000", &a) != collSuccess) _exit(2);
    double t0 = collTimeNow();
    collResult_t r = collSocketConnect(&a, &fd, t0 + 0.4, NULL);
    double dt = collTimeNow() - t0;
    if (r != collTimeout) _exit(3);
    if (dt < 0.39 || !strstr(collGetLastError(NULL), "No route to host")) _exit(4);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    print_message("skipped: needs root and ip(8) for a network namespace\n");
    return;
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- transport --------------------------------------------------------- */

static void test_properties_and_stubs(void** st) {
  (void)st;
  collNetProperties_t p;
  netCheckTable(N, "tcp", "lo", &p);
  assert_true(p.speedGbps == 100.0); /* lo has no readable sysfs speed */
  netPair_t q;
  netMakePair(N, &q);
  int fd = -1;
  assert_int_equal(N->getPollFd(q.send, &fd), collSuccess);
  assert_true(fd >= 0);
  netCheckStubs(N, &q);
  netClosePair(N, &q);
  assert_int_equal(N->fini(), collSuccess);
}

static void test_sizes(void** st) {
  (void)st;
  static const size_t sizes[] = {0, 1, 8, 65535, (1u << 20) + 3, 65536, 7};
  netPair_t q;
  netMakePair(N, &q);
  netRunStream(N, &kOpts, &q, 7, sizes, 10);
  netClosePair(N, &q);
}

static void test_many_in_flight(void** st) {
  (void)st;
  netTestManyInFlight(N, &kOpts);
}

static void test_test_drives_earlier(void** st) {
  (void)st;
  netTestTestDrivesEarlier(N);
}

static void test_tags(void** st) {
  (void)st;
  netTestTags(N, 1u << 20);
}

/* 64 requests in flight: the 65th isend returns NULL (retry) until one is
 * tested done. */
static void test_pool_exhaustion(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  void* r[COLL_TCP_MAX_REQUESTS];
  netFillRequestPool(N, q.send, r, COLL_TCP_MAX_REQUESTS);
  void* extra = NULL;
  size_t n = 5;
  assert_int_equal(netWaitReq(N, r[0], &n), collSuccess);
  assert_int_equal(n, 0);
  assert_int_equal(N->isend(q.send, NULL, 0, 0, NULL, &extra), collSuccess);
  assert_non_null(extra);
  assert_int_equal(netWaitReq(N, extra, &n), collSuccess);
  for (int k = 1; k < COLL_TCP_MAX_REQUESTS; k++) assert_int_equal(netWaitReq(N, r[k], &n), collSuccess);
  for (int k = 0; k <= COLL_TCP_MAX_REQUESTS; k++) {
    n = 5;
    assert_int_equal(netWaitReq(N, netPostOk(N, q.recv, 0, NULL, 0), &n), collSuccess);
    assert_int_equal(n, 0);
  }
  netClosePair(N, &q);
}

/* Sender sends 100 bytes, receiver posted 64: collRemoteError, nothing
 * written into the buffer or the guard bytes behind it. */
static void test_oversize(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  netCheckOversize(N, &q);
  netClosePair(N, &q);
}

/* Sender closes: the receiver's pending request fails with collRemoteError. */
static void test_peer_close_recv(void** st) {
  (void)st;
  netPair_t q;
  netMakePair(N, &q);
  uint8_t in[16];
  void* r = netPostOk(N, q.recv, 0, in, sizeof in);
  assert_int_equal(N->closeSend(q.send), collSuccess);
  size_t n;
  assert_int_equal(netWaitReq(N, r, &n), collRemoteError);
  assert_non_null(strstr(collGetLastError(NULL), "closed by peer"));
  assert_non_null(strstr(collGetLastError(NULL), "127.0.0.1:"));
  assert_int_equal(N->closeRecv(q.recv), collSuccess);
  assert_int_equal(N->closeListen(q.listen), collSuccess);
}

/* Receiver closes: large sends fail with collRemoteError (no SIGPIPE). */
static void test_peer_close_send(void** st) {
  (void)st;
  netTestPeerCloseSend(N, 1u << 20, NULL);
}

/* ---- striping (child process with COLL_NSOCKS_PERTHREAD=4) ------------- */

/* Writes the socket fds of this process into fds (max 64); returns count. */
static int listSockets(int* fds) {
  DIR* d = opendir("/proc/self/fd");
  assert_non_null(d);
  int n = 0;
  struct dirent* e;
  char path[300], target[64];
  while ((e = readdir(d))) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t l = readlink(path, target, sizeof target - 1);
    if (l > 0 && n < 64) {
      target[l] = 0;
      if (strncmp(target, "socket:", 7) == 0) fds[n++] = atoi(e->d_name);
    }
  }
  closedir(d);
  return n;
}

/* Bytes queued for reading on every socket fd of this process, largest
 * first, into q (zeros dropped); returns how many sockets have data. */
static int queuedBytes(int* q) {
  int fds[64], n = listSockets(fds), m = 0;
  for (int i = 0; i < n; i++) {
    int v = 0;
    if (ioctl(fds[i], FIONREAD, &v) == 0 && v > 0) q[m++] = v;
  }
  for (int i = 0; i < m; i++) /* insertion sort, descending */
    for (int j = i; j > 0 && q[j] > q[j - 1]; j--) { int t = q[j]; q[j] = q[j - 1]; q[j - 1] = t; }
  return m;
}

static void test_stripe_child(void** st) {
  (void)st;
  int fds[64], qb[64];
  int before = listSockets(fds);
  netPair_t q;
  netMakePair(N, &q);
  assert_int_equal(listSockets(fds), before + 1 + 2 * 4); /* listen + 4 per side */
  /* 160000 bytes >= 64 KiB: 40000 on each socket, plus the 16-byte header on socket 0 */
  uint8_t* big = malloc(160000);
  netFill(big, 160000, 42);
  size_t n = 0;
  assert_int_equal(netWaitReq(N, netPostOk(N, q.send, 1, big, 160000), &n), collSuccess);
  int m = 0;
  for (int i = 0; i < 5000; i++) {
    m = queuedBytes(qb);
    int sum = 0;
    for (int j = 0; j < m; j++) sum += qb[j];
    if (sum == 160016) break;
    usleep(1000);
  }
  assert_int_equal(m, 4);
  assert_int_equal(qb[0], 40016);
  assert_int_equal(qb[1], 40000);
  assert_int_equal(qb[2], 40000);
  assert_int_equal(qb[3], 40000);
  memset(big, 0, 160000);
  assert_int_equal(netWaitReq(N, netPostOk(N, q.recv, 0, big, 160000), &n), collSuccess);
  assert_int_equal(n, 160000);
  assert_true(netCheck(big, 160000, 42));
  free(big);
  static const size_t sizes[] = {0, 1, 65535, 65536, 65537, (1u << 20) + 3, (4u << 20) + 1, 9};
  netRunStream(N, &kOpts, &q, 8, sizes, 20);
  netRunStream(N, &kOpts, &q, 300, NULL, 5000);
  /* two connections arriving before either is accepted are grouped apart */
  char handle[COLL_NET_HANDLE_BYTES];
  void *l, *s1, *s2, *r1 = NULL, *r2 = NULL;
  assert_int_equal(N->listen(0, handle, &l), collSuccess);
  assert_int_equal(N->connect(0, handle, &s1), collSuccess);
  assert_int_equal(N->connect(0, handle, &s2), collSuccess);
  for (int i = 0; i < 5000 && !r2; i++) {
    assert_int_equal(N->accept(l, r1 ? &r2 : &r1), collSuccess);
    if (!r2) usleep(1000);
  }
  assert_non_null(r1);
  assert_non_null(r2);
  static const size_t one[] = {300000};
  netPair_t a = {l, s1, r1}, b = {NULL, s2, r2};
  netRunStream(N, &kOpts, &a, 1, one, 77);
  netRunStream(N, &kOpts, &b, 1, one, 88);
  assert_int_equal(N->closeSend(s2), collSuccess);
  assert_int_equal(N->closeRecv(r2), collSuccess);
  netClosePair(N, &a);
  netClosePair(N, &q);
}

static void test_striping(void** st) {
  (void)st;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("COLL_NSOCKS_PERTHREAD", "4", 1);
    execl("/proc/self/exe", "test_tcp", "--stripe-child", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char** argv) {
  setenv("COLL_SOCKET_IFNAME", "lo", 1);
  unsetenv("COLL_SOCKET_FAMILY");
  alarm(240); /* watchdog: every test is bounded */
  if (argc > 1 && strcmp(argv[1], "--stripe-child") == 0) {
    const struct CMUnitTest child[] = {cmocka_unit_test(test_stripe_child)};
    return cmocka_run_group_tests_name("tcp_stripe_nsocks4", child, NULL, NULL);
  }
  unsetenv("COLL_NSOCKS_PERTHREAD");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ifmatch),
      cmocka_unit_test(test_parse_addr),
      cmocka_unit_test(test_find_interface_lo),
      cmocka_unit_test(test_socket_helpers),
      cmocka_unit_test(test_connect_refused_deadline),
      cmocka_unit_test(test_connect_self_refused),
      cmocka_unit_test(test_connect_unreachable_waits),
      cmocka_unit_test(test_properties_and_stubs),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_many_in_flight),
      cmocka_unit_test(test_test_drives_earlier),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_pool_exhaustion),
      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_peer_close_recv),
      cmocka_unit_test(test_peer_close_send),
      cmocka_unit_test(test_striping),
  };
  return cmocka_run_group_tests_name("tcp", tests, NULL, NULL);
}
