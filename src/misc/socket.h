/*
 * socket.h - TCP socket helpers shared by the bootstrap and the tcp transport.
 * Every blocking helper takes an absolute deadline (collTimeNow() seconds,
 * 0 = none) and an optional abort flag, and never blocks past either.
 */
#ifndef COLL_SOCKET_H_
#define COLL_SOCKET_H_

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "coll.h"

typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} collSockAddr; /* 28 bytes */

/* Monotonic clock in seconds. */
double collTimeNow(void);

/* Picks the interface address to use (order in socket.c): among the
 * interfaces that are up with an address, selected by COLL_SOCKET_IFNAME
 * ("eth", "^docker", "=eth0", comma lists, as NCCL_SOCKET_IFNAME) and
 * COLL_SOCKET_FAMILY, the one this host reaches the root hint from (unless
 * that is loopback), then exact names, ordinary interfaces before container
 * bridges (docker*, veth*, ...) before loopback, IPv4 before IPv6. Writes the
 * address (port 0) and the name. Errors: collInvalidArgument (COLL_SOCKET_*
 * select nothing, or a bad COLL_SOCKET_FAMILY; the message lists the
 * interfaces), collInvalidUsage (no interface is up with an address),
 * collSystemError (getifaddrs). Thread-safe. */
collResult_t collSocketFindInterface(collSockAddr* addr, char* ifname,
                                     size_t ifnameLen);
/* The rendezvous of the communicator being created (its root's address):
 * later collSocketFindInterface calls of the process prefer the interface
 * that reaches it. Thread-safe; the latest call wins. */
void collSocketSetRootHint(const collSockAddr* root);
/* COLL_SOCKET_FAMILY as AF_INET, AF_INET6 or 0 (unset). Errors:
 * collInvalidArgument for any other value. */
collResult_t collSocketFamily(int* fam);
/* Interface matching used above: 1 if `name` is selected by `spec`. */
int collSocketIfMatch(const char* spec, const char* name);
/* The selection above on a given list (tests): the score of one entry
 * (lower is better, -1 = not a candidate) and the best entry (NULL: none).
 * routeSrc: the address toward the root, or NULL. */
struct ifaddrs;
int collSocketIfScore(const struct ifaddrs* ifa, const char* spec, int forceFam, const collSockAddr* routeSrc);
const struct ifaddrs* collSocketPickInterface(const struct ifaddrs* list, const char* spec, int forceFam,
                                              const collSockAddr* routeSrc);
/* Parses "host:port", "[v6addr]:port" or "v4addr:port" (getaddrinfo; IPv4
 * preferred unless COLL_SOCKET_FAMILY=AF_INET6). Errors: collInvalidArgument
 * (malformed, bad port, a name that does not resolve: the message says
 * which), collSystemError (the name service did not answer). */
collResult_t collSocketParseAddr(const char* hostport, collSockAddr* out);
/* "1.2.3.4:5678" / "[::1]:5678" into buf; returns buf. */
const char* collSockAddrStr(const collSockAddr* a, char* buf, size_t len);
socklen_t collSockAddrLen(const collSockAddr* a);

/* Binds and listens on addr (port 0 = ephemeral); writes the bound port back
 * into addr. fd is non-blocking, close-on-exec. */
collResult_t collSocketListen(collSockAddr* addr, int* fd);
/* Connects, retrying refused/timed-out attempts until deadline. The result is
 * non-blocking, close-on-exec, TCP_NODELAY. */
collResult_t collSocketConnect(const collSockAddr* addr, int* fd,
                               double deadline, volatile int* abortFlag);
/* The same; *lastErrno (may be NULL) gets the errno of the last failed
 * attempt (ECONNREFUSED, ETIMEDOUT...), 0 on success. */
collResult_t collSocketConnectErr(const collSockAddr* addr, int* fd, double deadline,
                                  volatile int* abortFlag, int* lastErrno);
/* Accepts one connection (waits until deadline). */
collResult_t collSocketAccept(int listenFd, int* fd, double deadline,
                              volatile int* abortFlag);
/* Sends/receives exactly n bytes on a non-blocking fd, polling. A closed
 * peer gives collRemoteError, the deadline collTimeout, the abort flag
 * collRemoteError. */
collResult_t collSocketSendAll(int fd, const void* buf, size_t n,
                               double deadline, volatile int* abortFlag);
collResult_t collSocketRecvAll(int fd, void* buf, size_t n, double deadline,
                               volatile int* abortFlag);
/* Sends sbuf to sfd and receives rbuf from rfd concurrently (no deadlock
 * when both sides send first). */
collResult_t collSocketSendRecv(int sfd, const void* sbuf, size_t sn, int rfd,
                                void* rbuf, size_t rn, double deadline,
                                volatile int* abortFlag);

#endif
