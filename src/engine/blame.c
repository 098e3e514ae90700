/*
 * blame.c - who stopped progressing? When a communicator fails (a timeout,
 * a closed connection), the rank it waited for is often a live neighbour
 * that itself waits: the rank that really stopped can be anywhere in the
 * job. For peers on this host the kernel knows: /proc/<pid>/stat gives the
 * state of each peer's process, so the message of every survivor on the
 * host can name the rank whose process exited (gone, or a zombie not yet
 * reaped by its launcher) or is stopped (SIGSTOP, SIGTSTP, a debugger).
 *
 * Ranks that exited after marking themselves failed in the node's mailbox
 * failed like us and are left out. Read once per failure, never on the
 * data path. Peers on other hosts are not examined (the message names the
 * rank this one waited for).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/blame.h"
#include "engine/engine.h"
#include "engine/mailbox.h"

char collProcState(int pid) {
  if (pid <= 0) return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) return 0;
    return kill(pid, 0) != 0 && errno == ESRCH ? 'X' : 0; /* /proc missing: ask the kernel */
  }
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 'X'; /* it went away between open and read */
  buf[n] = 0;
  /* "pid (comm) S ...": comm may contain spaces and parentheses */
  const char* p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : 0;
}

int collBlameSameHost(const struct collComm* comm, int peer) {
  const collPeerInfo* me = &comm->peers[comm->rank];
  const collPeerInfo* q = &comm->peers[peer];
  return peer != comm->rank && q->pid > 0 && q->hostHash == me->hostHash && q->kernelHash == me->kernelHash;
}

const char* collProcStateWords(char st) {
  switch (st) {
    case 'X': return "has exited";
    case 'Z': return "has exited (zombie, not yet reaped)";
    case 'T': return "is stopped (SIGSTOP/SIGTSTP)";
    case 't': return "is stopped by a debugger";
    default: return NULL;
  }
}

#define COLL_BLAME_MAX 8

/* A killed process closes its descriptors (our connection to it) before
 * the kernel shows it as a zombie: a survivor that blames at once may still
 * see it running. So when no same-host peer shows as exited or stopped, look
 * again for up to COLL_BLAME_SETTLE_MS (failure path only). */
#define COLL_BLAME_SETTLE_MS 50

static int collBlameAnyNews(collComm_t comm) {
  for (int i = 0; i < comm->nranks; i++) {
    if (!collBlameSameHost(comm, i)) continue;
    char st = collProcState(comm->peers[i].pid);
    if (collProcStateWords(st) && !((st == 'X' || st == 'Z') && collMailboxPeerFailed(comm, i))) return 1;
  }
  return 0;
}

void collEngineBlame(collComm_t comm, char* msg, size_t size) {
  if (!comm->peers) return;
  int samehost = 0;
  for (int i = 0; i < comm->nranks && !samehost; i++) samehost = collBlameSameHost(comm, i);
  for (int t = 0; samehost && t < COLL_BLAME_SETTLE_MS && !collBlameAnyNews(comm); t++) usleep(1000);
  size_t len = strlen(msg);
  int named = 0, more = 0;
  for (int i = 0; i < comm->nranks; i++) {
    if (!collBlameSameHost(comm, i)) continue;
    char st = collProcState(comm->peers[i].pid);
    const char* words = collProcStateWords(st);
    /* a rank that failed as we did and then exited is no news: skip ranks
     * that marked themselves failed in the mailbox before exiting */
    if (!words || ((st == 'X' || st == 'Z') && collMailboxPeerFailed(comm, i))) continue;
    if (named == COLL_BLAME_MAX) {
      more++;
      continue;
    }
    if (len + 1 < size)
      len += (size_t)snprintf(msg + len, size - len, "%s rank %d (pid %d on %s) %s", named ? ";" : "; on this host:",
                              i, (int)comm->peers[i].pid, comm->peers[i].host, words);
    if (len >= size) len = size - 1;
    named++;
  }
  if (more && len + 1 < size) snprintf(msg + len, size - len, "; and %d more such rank(s)", more);
}
