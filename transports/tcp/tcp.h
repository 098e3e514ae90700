/* tcp.h - the built-in TCP transport (transports/tcp/tcp.c). */
#ifndef COLL_TRANSPORT_TCP_H_
#define COLL_TRANSPORT_TCP_H_

#include "coll_net.h"

/* Operations table of the "tcp" transport. Semantics beyond coll_net.h:
 *  - one device: the interface chosen by collSocketFindInterface;
 *  - connect retries a listener that refuses for at most 1 s, then returns
 *    collSuccess with *sendComm NULL ("not yet", nothing kept: the caller
 *    decides how long to go on, coll's engine COLL_CONNECT_TIMEOUT_MS);
 *    once the listener took the first socket, the others of the connection
 *    are waited for up to COLL_CONNECT_TIMEOUT_MS; accept never blocks on
 *    the listen socket;
 *  - at most COLL_TCP_MAX_REQUESTS requests in flight per comm: beyond that
 *    isend/irecv return collSuccess with *request = NULL (retry later);
 *  - test returning an error releases the request (do not test it again);
 *    once a comm failed, every later request on it fails the same way;
 *  - iflush returns collSuccess with *request = NULL: nothing to wait for;
 *  - iput is not supported (collInvalidUsage). */
extern const collNet_t collNetTcp;

#define COLL_TCP_MAX_REQUESTS 64
#define COLL_TCP_MAX_SOCKS 16          /* cap on COLL_NSOCKS_PERTHREAD */
#define COLL_TCP_STRIPE_MIN (64 * 1024) /* messages this large are striped */

#endif
