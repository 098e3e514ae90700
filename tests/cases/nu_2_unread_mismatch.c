/*
 * nu_2_unread_mismatch.c - new user's finding 2: a mismatched call that
 * moves no data to a reader must not pass silently.
 *
 *  bcast_next  3 ranks, each calls collBroadcast(100000 floats, root = its
 *              rank) (every rank only sends: all return success), then
 *              collAllReduce of 1000 floats: the all-reduce fails on EVERY
 *              rank with collInvalidUsage naming the broadcasts. With shared
 *              memory the all-reduce runs in the mailbox, which never reads
 *              the broadcasts' messages (before the fix: no error anywhere);
 *              over TCP (nu_2_unread_mismatch.cmake, no mailbox) it runs a
 *              schedule that reads them (or a peer that failed first reset
 *              the connection: collRemoteError).
 *  bcast_last  the same broadcasts as the last call, then collCommDestroy:
 *              every rank whose broadcast succeeded WARNs at its destroy
 *              "the last collective was mismatched" naming both calls (a
 *              rank still sending when its peer destroyed fails instead);
 *              shared memory only: the mailbox keeps every rank's last call.
 *  p2p_next    rank 0 sends 1000 floats, rank 1 receives 2000 (rank 1 fails
 *              naming both); 1 s later rank 0's next send to rank 1 fails
 *              with collRemoteError saying that rank 1 failed earlier (before:
 *              "shm: peer process N closed the shared-memory connection", or
 *              no error when the send came before rank 1 closed). Shared
 *              memory only (the mailbox carries the flag).
 *  p2p_destroy as p2p_next, but rank 0 destroys instead: its destroy WARNs
 *              that rank 1 failed after the last call with it.
 * COLL_TIMEOUT is 20 s: every detection must come well before (10 s).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../integration/mp_harness.h"

enum { BCAST_NEXT, BCAST_LAST, P2P_NEXT, P2P_DESTROY };
static int kind;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* stderr into a memfd, to read the WARNs back */
static int captureStderr(void) {
  fflush(stderr);
  int fd = memfd_create("nu2-stderr", 0);
  if (fd >= 0) dup2(fd, 2);
  return fd;
}

static int stderrSays(int fd, const char* want) {
  static char buf[1 << 16];
  fflush(stderr);
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = 0;
  printf("    stderr: %s", buf[0] ? buf : "(empty)\n");
  return strstr(buf, want) != NULL;
}

static int body(collComm_t none, int rank, int nranks, void* arg) {
  (void)none;
  int fd = captureStderr();
  collComm_t comm;
  if (collCommInitRank(&comm, nranks, *(collUniqueId*)arg, rank) != collSuccess) {
    printf("rank %d: init: %s\n", rank, collGetLastError(NULL));
    return 1;
  }
  size_t n = 100000;
  float* a = calloc(2 * n, sizeof(float));
  float* b = calloc(2 * n, sizeof(float));
  int bad = 0;
  double t0 = now();
  if (kind == BCAST_NEXT || kind == BCAST_LAST) {
    collResult_t r = collBroadcast(a, b, n, collFloat, rank, comm, NULL);
    printf("rank %d: broadcast from root %d: %s\n", rank, rank, collGetErrorString(r));
    if (kind == BCAST_NEXT && r == collSuccess) {
      r = collAllReduce(a, b, 1000, collFloat, collSum, comm, NULL);
      const char* e = collGetLastError(NULL);
      printf("rank %d: next all-reduce: %s: %s (%.2f s)\n", rank, collGetErrorString(r), e, now() - t0);
      /* over TCP a peer that failed first may reset the connection before
       * this rank reads the broadcast's message: a remote error then */
      int named = r == collInvalidUsage && strstr(e, "broadcast of 100000 x float32 from root");
      if (!(named || (r == collRemoteError && getenv("COLL_SHM_DISABLE"))) || now() - t0 > 10) bad = 1;
    } else if (kind == BCAST_NEXT) {
      printf("rank %d: %s\n", rank, collGetLastError(NULL)); /* failing here is fine too */
      if (r != collInvalidUsage && r != collRemoteError) bad = 1;
    }
    collCommDestroy(comm);
    /* a rank still sending when a peer destroyed fails its broadcast instead */
    if (kind == BCAST_LAST && r == collSuccess && !stderrSays(fd, "collCommDestroy: the last collective was mismatched"))
      bad = 1;
    if (kind == BCAST_LAST && r != collSuccess) printf("rank %d: %s\n", rank, collGetLastError(NULL));
  } else {
    collResult_t r = rank == 0 ? collSend(a, 1000, collFloat, 1, comm, NULL) : collRecv(b, 2000, collFloat, 0, comm, NULL);
    printf("rank %d: %s: %s %s\n", rank, rank ? "recv 2000" : "send 1000", collGetErrorString(r), collGetLastError(NULL));
    if (rank == 1 && (r != collInvalidUsage || !strstr(collGetLastError(NULL), "sent 1000 x float32"))) bad = 1;
    if (rank == 0) {
      usleep(1000 * 1000); /* rank 1 has failed by now */
      if (kind == P2P_NEXT) {
        r = collSend(a, 1000, collFloat, 1, comm, NULL);
        const char* e = collGetLastError(NULL);
        printf("rank 0: next send: %s: %s\n", collGetErrorString(r), e);
        if (r != collRemoteError || !strstr(e, "rank 1 (") || !strstr(e, "failed earlier")) bad = 1;
      }
    }
    collCommDestroy(comm);
    if (rank == 0 && kind == P2P_DESTROY && !stderrSays(fd, "rank 1") ) bad = 1;
    if (rank == 0 && kind == P2P_DESTROY && !stderrSays(fd, "failed after this rank's last call")) bad = 1;
  }
  free(a);
  free(b);
  fflush(stdout);
  return bad;
}

static int run(int k, int nranks, const char* name) {
  kind = k;
  int f = collMpRunRaw(nranks, 60, body, NULL, NULL);
  printf("%s: %s\n", name, f ? "FAIL" : "ok");
  return f;
}

int main(void) {
  setenv("COLL_TIMEOUT", "20", 1);
  int shm = getenv("COLL_SHM_DISABLE") == NULL;
  int f = run(BCAST_NEXT, 3, "broadcasts with different roots, then a small all-reduce");
  if (shm) {
    f |= run(BCAST_LAST, 3, "broadcasts with different roots as the last call, then destroy");
    f |= run(P2P_NEXT, 2, "send 1000 / recv 2000, then the sender's next send");
    f |= run(P2P_DESTROY, 2, "send 1000 / recv 2000, then the sender's destroy");
  }
  return f;
}
