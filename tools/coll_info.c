/*
 * coll_info - what coll sees on this machine, in one command:
 *   every COLL_* parameter with its value in force, default, range and doc;
 *   the algorithm registry (names for COLL_ALGO, per collective);
 *   the transports and their devices;
 *   the topology summary (hwloc: cores, NUMA nodes, GPUs, NICs);
 *   the tuner's choice per collective and size for N ranks on this machine
 *   (forked processes with real communicators: shared memory, the mailbox,
 *   COLL_TUNE_CALIBRATE if set; --nodes K emulates K nodes with COLL_HOSTID).
 *
 * Usage: coll_info [-n NRANKS] [--nodes K] [--no-tuner] [--params [--markdown]] [-h]
 *   --params: the parameters only; --markdown: as README's table (defaults,
 *   not the values in force: tools/readme_params.sh checks README with it).
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algorithms/algorithms.h"
#include "coll.h"
#include "core/comm.h"
#include "core/net.h"
#include "device/cuda_loader.h"
#include "device/devexec.h"
#include "engine/mailbox.h"
#include "misc/log.h"
#include "misc/param.h"
#include "reduce/reduce.h"
#include "topo/topo.h"
#include "tuner/tuner.h"

static const char* kFns[] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce"};

static void params(void) {
  printf("== parameters (COLL_DEBUG=INFO prints them at init too)\n");
  collParamRowInfo row;
  for (int i = 0; collParamRow(i, &row); i++)
    printf("%-24s %-6s value %-12s%s default %-10s %s%s%s\n    %s\n", row.name, row.type, row.value,
           row.fromEnv ? " (env)" : "      ", row.def, row.range[0] ? "range " : "", row.range, "", row.doc);
}

/* s with Markdown table cells' specials escaped. */
static void mdCell(const char* s) {
  for (; *s; s++) {
    if (*s == '|' || *s == '\\') putchar('\\');
    putchar(*s);
  }
}

/* The parameter table as Markdown, from the defaults (README.md's
 * "Environment variables" table is this output). */
static void paramsMarkdown(void) {
  printf("| variable | type | default | range | meaning |\n|---|---|---|---|---|\n");
  collParamRowInfo row;
  for (int i = 0; collParamRow(i, &row); i++) {
    long long lo, hi;
    char range[64];
    snprintf(range, sizeof range, "%s", row.range[0] ? row.range : "-");
    if (sscanf(row.range, "[%lld, %lld]", &lo, &hi) == 2 && (hi == INT32_MAX || hi == INT64_MAX))
      snprintf(range, sizeof range, ">= %lld", lo); /* "no maximum" reads better than 2^31-1 */
    printf("| `%s` | %s | %s%s%s | %s | ", row.name, row.type, strcmp(row.def, "-") ? "`" : "", row.def,
           strcmp(row.def, "-") ? "`" : "", range);
    mdCell(row.doc);
    printf(" |\n");
  }
}

static void algorithms(void) {
  printf("\n== algorithms (COLL_ALGO names; the first of each collective is its default)\n");
  for (int fn = 0; fn <= COLL_FN_REDUCE; fn++) {
    printf("%-15s", kFns[fn]);
    for (const collAlgo* a = collAlgoTable; a->name; a++)
      if (a->funcMask & (1u << fn)) printf(" %s", a->name);
    printf("%s\n", fn <= COLL_FN_REDUCESCATTER ? "  (small calls inside one node: mailbox)" : "");
  }
  printf("%-15s direct (point-to-point: each send goes straight to its receiver; no COLL_ALGO choice)\n",
         "send/recv");
}

static void transports(void) {
  printf("\n== transports\n");
  const char* names[] = {"tcp", "loopback", "ib"};
  const char* notes[] = {"", " (ranks as threads of one process)", ""};
  for (int k = 0; k < 3; k++) {
    const collNet_t* net = NULL;
    collResult_t r = collNetGetInter(names[k], &net);
    if (r != collSuccess) {
      printf("%-9s unavailable: %s\n", names[k], collGetLastError(NULL));
      continue;
    }
    int ndev = 0;
    net->devices(&ndev);
    printf("%-9s between nodes%s, %d device(s)\n", net->name, notes[k], ndev);
    for (int d = 0; d < ndev; d++) {
      collNetProperties_t p;
      if (net->getProperties(d, &p) != collSuccess) continue;
      printf("  %-12s %6.1f Gbit/s  %5.1f us  %s\n", p.name, p.speedGbps, p.latencyUs, p.pciPath[0] ? p.pciPath : "");
    }
    if (k == 0) {
      const collNet_t* shm = collNetGetIntra(net);
      printf("%-9s inside a node: %s\n", "shm", shm ? "available" : "unavailable (COLL_SHM_DISABLE or the system)");
    }
  }
  /* the library loads the driver at first use; coll_info loads it to tell */
  int ngpu = 0;
  if (collCudaLoadQuiet() != collSuccess)
    printf("%-9s unavailable: %s\n", "p2p", collCudaLoadMessage());
  else if ((ngpu = collDevCount()) <= 0)
    printf("%-9s unavailable: the CUDA driver (%s) sees no GPU\n", "p2p", collParamStr(COLL_SPARAM_CUDA_LIBRARY));
  else
    printf("%-9s CUDA P2P between the GPUs of a node, for GPU buffers: %d GPU(s), driver %s\n", "p2p", ngpu,
           collParamStr(COLL_SPARAM_CUDA_LIBRARY));
  /* what a communicator created now would use: each pair takes the first of
   * these that both ranks have and that accepts the pair */
  collNetList list;
  const char* forced = collParamStr(COLL_SPARAM_NET);
  if (collNetGetList(forced, &list) != collSuccess) {
    printf("order    for a new communicator: %s\n", collGetLastError(NULL));
    return;
  }
  printf("order    for a new communicator (COLL_NET=%s), first that fits each pair:", forced ? forced : "unset");
  for (int k = 0; k < COLL_NET_SLOTS; k++)
    if (list.nets[k]) printf(" %s%s", list.nets[k]->name, k == COLL_NET_INTRA ? " (same node)" : "");
  printf("\n");
}

static void topology(void) {
  printf("\n== topology\n");
  collTopoSummary s;
  const char* file = collParamStr(COLL_SPARAM_TOPO_FILE);
  if (collTopoSummarize(file, NULL, &s) != collSuccess) {
    printf("hwloc: %s\n", collGetLastError(NULL));
    return;
  }
  char buf[1024];
  printf("%s%s\n", file ? "from COLL_TOPO_FILE: " : "", collTopoFormat(&s, buf, sizeof buf));
}

/* Rank 0 of the tuner run: the choice for each collective and size. */
static void tunerTable(collComm_t comm) {
  printf("\n== tuner: %d ranks on %d node(s) of this machine%s (float32; us = predicted time)\n", comm->nranks,
         comm->nnodes, collParamInt(COLL_PARAM_TUNE_CALIBRATE) ? ", links calibrated" : "");
  printf("%-10s", "bytes");
  for (int fn = 0; fn <= COLL_FN_REDUCE; fn++) printf(" %-28s", kFns[fn]);
  printf("\n");
  for (size_t bytes = 8; bytes <= ((size_t)256 << 20); bytes *= 4) {
    printf("%-10zu", bytes);
    for (int fn = 0; fn <= COLL_FN_REDUCE; fn++) {
      collOp op;
      memset(&op, 0, sizeof op);
      op.fn = (collFunc)fn;
      op.count = bytes / 4;
      op.dtype = collFloat;
      op.algo = collAlgoOverride((collFunc)fn);
      char cell[64];
      collTuneChoice c;
      if (collMailboxFits(comm, &op)) snprintf(cell, sizeof cell, "mailbox");
      else if (collTunerChoose(comm, (collFunc)fn, op.count, collFloat, op.algo, 0, &c) != collSuccess)
        snprintf(cell, sizeof cell, "(none)");
      else
        snprintf(cell, sizeof cell, "%s/%dch/%zuK %.0fus", c.algo->name, c.nchannels, c.chunkBytes >> 10,
                 c.predictedUs);
      printf(" %-28s", cell);
    }
    printf("\n");
  }
}

static int tunerRun(int nranks, int nnodes) {
  pid_t* pids = calloc((size_t)nranks, sizeof *pids);
  int* pipes = calloc((size_t)nranks, sizeof *pipes);
  if (!pids || !pipes) return 1;
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  fflush(stdout);
  for (int r = 0; r < nranks; r++) { /* fork before the id's root thread starts */
    int fd[2];
    if (pipe(fd) != 0) return 1;
    pid_t p = fork();
    if (p == 0) {
      close(fd[1]);
      collUniqueId id;
      if (read(fd[0], &id, sizeof id) != (ssize_t)sizeof id) _exit(3);
      if (nnodes > 1) {
        char host[32];
        snprintf(host, sizeof host, "coll-info-node%d", r * nnodes / nranks);
        setenv("COLL_HOSTID", host, 1);
      }
      collComm_t comm;
      if (collCommInitRank(&comm, nranks, id, r) != collSuccess) {
        fprintf(stderr, "coll_info: rank %d: %s\n", r, collGetLastError(NULL));
        _exit(2);
      }
      if (r == 0) tunerTable(comm);
      fflush(stdout);
      collBarrier(comm, NULL);
      collCommDestroy(comm);
      _exit(0);
    }
    close(fd[0]);
    pids[r] = p;
    pipes[r] = fd[1];
  }
  collUniqueId id;
  int rc = 0;
  if (collGetUniqueId(&id) != collSuccess) {
    fprintf(stderr, "coll_info: collGetUniqueId: %s\n", collGetLastError(NULL));
    rc = 1;
  }
  for (int r = 0; r < nranks; r++) {
    if (rc == 0 && write(pipes[r], &id, sizeof id) != (ssize_t)sizeof id) rc = 1;
    close(pipes[r]);
  }
  for (int r = 0; r < nranks; r++) {
    int st = 0;
    if (rc) kill(pids[r], SIGKILL);
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  free(pids);
  free(pipes);
  return rc;
}

int main(int argc, char** argv) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nranks = cores < 2 ? 2 : cores > 8 ? 8 : (int)cores, nnodes = 1, tuner = 1, onlyParams = 0, markdown = 0;
  static const struct option longopts[] = {{"nranks", required_argument, 0, 'n'},
                                           {"nodes", required_argument, 0, 'N'},
                                           {"no-tuner", no_argument, 0, 'T'},
                                           {"params", no_argument, 0, 'P'},
                                           {"markdown", no_argument, 0, 'M'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "n:h", longopts, NULL)) != -1) {
    switch (c) {
      case 'n': nranks = atoi(optarg); break;
      case 'N': nnodes = atoi(optarg); break;
      case 'T': tuner = 0; break;
      case 'P': onlyParams = 1; break;
      case 'M': markdown = 1; break;
      case 'h':
        printf("usage: %s [-n NRANKS (default: cores, 2..8)] [--nodes K (emulated with COLL_HOSTID)] [--no-tuner]\n"
               "       %s --params [--markdown]  (the parameters only; --markdown: README's table of defaults)\n",
               argv[0], argv[0]);
        return 0;
      default: return 2;
    }
  }
  if (nranks < 1 || nranks > 256 || nnodes < 1 || nnodes > nranks) {
    fprintf(stderr, "coll_info: need 1 <= --nodes <= -n <= 256\n");
    return 2;
  }
  if (markdown && !onlyParams) {
    fprintf(stderr, "coll_info: --markdown goes with --params\n");
    return 2;
  }
  if (markdown) {
    paramsMarkdown();
    return 0;
  }
  if (onlyParams) {
    params();
    return 0;
  }
  int v = 0;
  collGetVersion(&v);
  printf("coll %d.%d.%d (code %d)\n\n", v / 10000, v / 100 % 100, v % 100, v);
  params();
  algorithms();
  transports();
  topology();
  return tuner ? tunerRun(nranks, nnodes) : 0;
}
