/*
 * init_env.c - ways to create communicators: collGetUniqueId,
 * collCommInitAll (ranks as threads) and collCommInitFromEnv (launchers).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/log.h"
#include "misc/param.h"

collResult_t collUniqueIdAt(collUniqueId* uid, const collSockAddr* addr, int bindAny) {
  memset(uid, 0, sizeof *uid);
  collBootId id;
  collResult_t r = collBootCreateRoot(&id, addr, bindAny);
  if (r == collSuccess) memcpy(uid->internal, &id, sizeof id);
  return r;
}

collResult_t collGetUniqueIdImpl(collUniqueId* uid) {
  collLogInit();
  if (!uid) return collSetError(collInvalidArgument, "collGetUniqueId: uniqueId is NULL");
  collSockAddr addr;
  const char* commId = collParamStr(COLL_SPARAM_COMM_ID);
  collResult_t r;
  if (commId) {
    if ((r = collSocketParseAddr(commId, &addr)) != collSuccess)
      return collSetError(r, "COLL_COMM_ID: %s", collLastErrorMessage());
    return collUniqueIdAt(uid, &addr, 1);
  }
  char ifname[64];
  if ((r = collSocketFindInterface(&addr, ifname, sizeof ifname)) != collSuccess) return r;
  return collUniqueIdAt(uid, &addr, 0);
}

/* ---- collCommInitAll ------------------------------------------------------ */
typedef struct {
  collComm_t* comm;
  collUniqueId id;
  int nranks, rank;
  collResult_t result;
  char msg[512];
} collInitAllArg;

static void* collInitAllThread(void* p) {
  collInitAllArg* a = p;
  a->result = collCommInitRank(a->comm, a->nranks, a->id, a->rank);
  if (a->result != collSuccess) snprintf(a->msg, sizeof a->msg, "%s", collLastErrorMessage());
  return NULL;
}

collResult_t collCommInitAllImpl(collComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;
  if (!comms) return collSetError(collInvalidArgument, "collCommInitAll: comms is NULL");
  if (ndev < 1) return collSetError(collInvalidArgument, "collCommInitAll: ndev %d < 1", ndev);
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  if (r != collSuccess) return r;
  collInitAllArg* args = calloc((size_t)ndev, sizeof *args);
  pthread_t* th = calloc((size_t)ndev, sizeof *th);
  if (!args || !th) {
    free(args);
    free(th);
    return collSetError(collSystemError, "collCommInitAll: out of memory");
  }
  int started = 0;
  for (int i = 0; i < ndev; i++) {
    comms[i] = NULL;
    args[i] = (collInitAllArg){&comms[i], id, ndev, i, collSuccess, ""};
    if (pthread_create(&th[i], NULL, collInitAllThread, &args[i]) != 0) {
      r = collSetError(collSystemError, "collCommInitAll: cannot start thread %d", i);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started && r == collSuccess; i++)
    if (args[i].result != collSuccess) r = collSetError(args[i].result, "collCommInitAll: rank %d: %s", i, args[i].msg);
  if (r != collSuccess || started < ndev)
    for (int i = 0; i < started; i++) {
      collCommAbort(comms[i]);
      comms[i] = NULL;
    }
  free(args);
  free(th);
  return r;
}

/* ---- collCommInitFromEnv -------------------------------------------------- */
/* A launcher variable as a decimal integer in [lo, hi]: 0 unset (or empty),
 * 1 set and valid, -1 set but not such an integer. */
static int collEnvLong(const char* name, long lo, long hi, long* out) {
  const char* s = getenv(name);
  if (!s || !*s) return 0;
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi) return -1;
  *out = v;
  return 1;
}

static int collEnvInt(const char* name, int* out) {
  long v;
  int k = collEnvLong(name, 0, 1 << 20, &v);
  if (k == 1) *out = (int)v;
  return k;
}

static const char* collEnvStr(const char* name) {
  const char* s = getenv(name);
  return s ? s : "";
}

/* Rank and size from the first launcher whose two variables are both set.
 * Errors name the variable and its value: one of a pair without the other,
 * a size outside [1, 65536], a rank outside [0, size). */
static collResult_t collEnvRankSize(int* rank, int* size, int* which) {
  static const char* pairs[][2] = {{"RANK", "WORLD_SIZE"},
                                   {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"},
                                   {"SLURM_PROCID", "SLURM_NTASKS"}};
  int half = -1;
  for (int i = 0; i < 4; i++) {
    const char *rv = pairs[i][0], *sv = pairs[i][1];
    int hasR = *collEnvStr(rv) != 0, hasS = *collEnvStr(sv) != 0;
    if (hasR != hasS && half < 0) half = i;
    if (!hasR || !hasS) continue;
    long s, r;
    if (collEnvLong(sv, 1, 65536, &s) != 1)
      return collSetError(collInvalidArgument,
                          "collCommInitFromEnv: %s=%s is not a world size (expected an integer in [1, 65536])", sv,
                          collEnvStr(sv));
    if (collEnvLong(rv, 0, 65535, &r) != 1 || r >= s)
      return collSetError(collInvalidArgument,
                          "collCommInitFromEnv: %s=%s is not a rank of %s=%ld (expected an integer in [0, %ld])", rv,
                          collEnvStr(rv), sv, s, s - 1);
    *rank = (int)r;
    *size = (int)s;
    *which = i;
    return collSuccess;
  }
  if (half >= 0) {
    const char *rv = pairs[half][0], *sv = pairs[half][1];
    const char* set = *collEnvStr(rv) ? rv : sv;
    const char* unset = set == rv ? sv : rv;
    return collSetError(collInvalidArgument, "collCommInitFromEnv: %s=%s is set but %s is not (a launcher sets both)",
                        set, collEnvStr(set), unset);
  }
  return collSetError(collInvalidUsage,
                      "collCommInitFromEnv: no launcher variables (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/_SIZE, "
                      "PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS)");
}

static uint64_t collFnv(const char* s, uint64_t h) {
  for (; s && *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

collResult_t collCommInitFromEnvImpl(collComm_t* comm, collConfig_t* config) {
  collLogInit();
  if (!comm) return collSetError(collInvalidArgument, "collCommInitFromEnv: comm is NULL");
  static const char* launcherName[] = {"torchrun", "Open MPI", "PMI (MPICH/Hydra)", "Slurm"};
  int rank = -1, size = -1, which = -1;
  collResult_t r = collEnvRankSize(&rank, &size, &which);
  if (r != collSuccess) return r;
  /* Rendezvous: COLL_COMM_ID, else MASTER_ADDR:MASTER_PORT+1 (torch's store
   * owns MASTER_PORT), else, when the launcher says every rank is on this
   * node, a loopback port derived from the launcher's job id. */
  char hostport[300] = "";
  const char* what = "COLL_COMM_ID";
  const char* commId = collParamStr(COLL_SPARAM_COMM_ID);
  const char* maddr = getenv("MASTER_ADDR");
  const char* mport = getenv("MASTER_PORT");
  const char* job = getenv("PMIX_NAMESPACE");
  if (!job) job = getenv("OMPI_MCA_ess_base_jobid");
  if (!job) job = getenv("PMI_ID") ? getenv("PMI_KVSNAME") : NULL;
  if (!job) job = getenv("SLURM_JOB_ID");
  if (!job) job = getenv("TORCHELASTIC_RUN_ID");
  int localSize = -1;
  if (collEnvInt("OMPI_COMM_WORLD_LOCAL_SIZE", &localSize) <= 0 && collEnvInt("MPI_LOCALNRANKS", &localSize) <= 0 &&
      collEnvInt("LOCAL_WORLD_SIZE", &localSize) <= 0)
    localSize = -1;
  if (commId) {
    snprintf(hostport, sizeof hostport, "%s", commId);
  } else if (maddr && *maddr && mport && *mport) {
    long p;
    if (collEnvLong("MASTER_PORT", 1, 65534, &p) != 1)
      return collSetError(collInvalidArgument,
                          "collCommInitFromEnv: MASTER_PORT=%s is not a port coll can use (expected an integer in "
                          "[1, 65534]: coll's rendezvous listens on MASTER_PORT+1)",
                          mport);
    snprintf(hostport, sizeof hostport, strchr(maddr, ':') ? "[%s]:%ld" : "%s:%ld", maddr, p + 1);
    what = "MASTER_ADDR:MASTER_PORT+1";
  } else if ((maddr && *maddr) != (mport && *mport)) {
    const char* set = maddr && *maddr ? "MASTER_ADDR" : "MASTER_PORT";
    return collSetError(collInvalidArgument, "collCommInitFromEnv: %s=%s is set but %s is not (set both, or COLL_COMM_ID)",
                        set, getenv(set), set[7] == 'A' ? "MASTER_PORT" : "MASTER_ADDR");
  } else if (localSize == size && job) {
    snprintf(hostport, sizeof hostport, "127.0.0.1:%d", (int)(20000 + collFnv(job, 1469598103934665603ull) % 30000));
    what = "a loopback port derived from the job id";
  } else {
    return collSetError(collInvalidUsage,
                        "collCommInitFromEnv: %s launched %d rank%s but no rendezvous address: set COLL_COMM_ID=host:port "
                        "or MASTER_ADDR/MASTER_PORT",
                        launcherName[which], size, size == 1 ? "" : "s");
  }
  collSockAddr addr;
  r = collSocketParseAddr(hostport, &addr);
  if (r != collSuccess)
    return collSetError(r, "collCommInitFromEnv: rendezvous from %s: %s",
                        commId ? "COLL_COMM_ID" : maddr && mport ? "MASTER_ADDR:MASTER_PORT+1" : "the job id",
                        collLastErrorMessage());
  r = collSocketParseAddr(hostport, &addr);
  if (r != collSuccess) return collSetError(r, "collCommInitFromEnv: rendezvous %s is not host:port", hostport);
  /* Every rank derives the same key from the job id and the address; rank 0
   * hosts the root, which serves the address while its communicator lives
   * (so that a second job on the same address fails loudly, not merges). */
  collBootId id;
  memset(&id, 0, sizeof id);
  id.magic = COLL_BOOT_MAGIC;
  id.version = COLL_VERSION_CODE;
  id.root = addr;
  collBootDeriveKey(job, hostport, id.key);
  collBootRoot* root = NULL;
  if (rank == 0) {
    collBootRootCfg cfg = {id.key, size, (double)collParamInt(COLL_PARAM_INIT_TIMEOUT), 1, what};
    int inUse = 0;
    char err[512], holder[400] = "";
    r = collBootRootStart(&cfg, &id.root, 1, &root, &inUse);
    /* The address may be held for a moment only (a rank's connect that met
     * itself on this port, TCP simultaneous open, closes at once): try again
     * for up to 1 s before asking who holds it. */
    for (int t = 0; r != collSuccess && inUse && t < 20; t++) {
      usleep(50 * 1000);
      r = collBootRootStart(&cfg, &id.root, 1, &root, &inUse);
    }
    if (r != collSuccess) {
      snprintf(err, sizeof err, "%s", collLastErrorMessage());
      if (inUse) collBootProbeHolder(&id, rank, size, holder, sizeof holder);
      return collSetError(r, "collCommInitFromEnv: rank 0 cannot host the rendezvous %s (%s): %s%s%s%s", hostport,
                          what, err, inUse ? "; " : "", holder,
                          inUse ? ". Is another job (or another communicator of this process) using this port?" : "");
    }
  }
  collUniqueId uid;
  memset(&uid, 0, sizeof uid);
  memcpy(uid.internal, &id, sizeof id);
  COLL_INFO(COLL_SUB_INIT, "collCommInitFromEnv: %s rank %d of %d, rendezvous %s", launcherName[which], rank, size,
            hostport);
  return collCommInitRankRoot(comm, size, uid, rank, config, root);
}
