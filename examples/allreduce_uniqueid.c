/*
 * allreduce_uniqueid.c - a communicator from a unique id, the way NCCL
 * programs make one: rank 0 calls collGetUniqueId and hands the id to the
 * other ranks out of band; every rank then calls collCommInitRank.
 *
 * Here the ranks are processes forked by this program, and the id travels
 * through a pipe to each child (any channel works: a file, MPI_Bcast, a
 * key-value store). The children are forked before the id exists: the id's
 * creation starts the library's rendezvous thread, and a process should
 * not fork while threads hold locks.
 *
 *   ./allreduce_uniqueid [NRANKS]     (default 4)
 *
 * Every rank contributes rank+1 to each of 1024 floats; every element of
 * the result must be NRANKS*(NRANKS+1)/2. Exits 0 when all ranks agree.
 */
#include <coll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 1024 };

/* One rank: reads the id from fd, joins, all-reduces, checks. */
static int rankMain(int rank, int nranks, int fd) {
  collUniqueId id;
  if (read(fd, &id, sizeof id) != (ssize_t)sizeof id) return 2; /* the parent failed */
  close(fd);
  collComm_t comm;
  collResult_t r = collCommInitRank(&comm, nranks, id, rank);
  if (r != collSuccess) {
    fprintf(stderr, "rank %d: collCommInitRank: %s: %s\n", rank, collGetErrorString(r), collGetLastError(NULL));
    return 1;
  }
  float* x = malloc(N * sizeof *x);
  float* y = malloc(N * sizeof *y);
  if (!x || !y) return 1;
  for (int i = 0; i < N; i++) x[i] = (float)(rank + 1);
  r = collAllReduce(x, y, N, collFloat, collSum, comm, NULL); /* NULL stream: blocking */
  int wrong = 0;
  for (int i = 0; r == collSuccess && i < N; i++) wrong += y[i] != (float)(nranks * (nranks + 1) / 2);
  if (r != collSuccess) fprintf(stderr, "rank %d: collAllReduce: %s\n", rank, collGetLastError(comm));
  else printf("rank %d of %d: sum %.0f, %d wrong\n", rank, nranks, y[0], wrong);
  collCommDestroy(comm);
  free(x);
  free(y);
  return r != collSuccess || wrong;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  if (nranks < 1 || nranks > 64) {
    fprintf(stderr, "usage: %s [NRANKS in 1..64]\n", argv[0]);
    return 2;
  }
  setenv("COLL_SOCKET_IFNAME", "lo", 0); /* every rank is on this host */
  int fds[64];
  pid_t pids[64];
  fflush(stdout);
  for (int r = 0; r < nranks; r++) {
    int p[2];
    if (pipe(p) != 0 || (pids[r] = fork()) < 0) {
      perror("pipe/fork");
      return 1;
    }
    if (pids[r] == 0) {
      close(p[1]);
      _exit(rankMain(r, nranks, p[0]));
    }
    close(p[0]);
    fds[r] = p[1];
  }
  collUniqueId id; /* "rank 0" is this parent: it hosts the rendezvous */
  collResult_t res = collGetUniqueId(&id);
  if (res != collSuccess) fprintf(stderr, "collGetUniqueId: %s\n", collGetLastError(NULL));
  for (int r = 0; r < nranks; r++) {
    if (res == collSuccess && write(fds[r], &id, sizeof id) != (ssize_t)sizeof id) res = collSystemError;
    close(fds[r]); /* without an id the child exits 2 */
  }
  int failed = res != collSuccess;
  for (int r = 0; r < nranks; r++) {
    int st;
    if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  printf("%s\n", failed ? "FAILED" : "all ranks agree");
  return failed;
}
