/* obs_file.c - file names (%h %p %r %c) and JSON strings for src/obs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "misc/log.h"
#include "obs/obs_internal.h"

int collObsPath(collComm_t comm, const char* spec, char* out, size_t len) {
  size_t o = 0;
  for (const char* c = spec; *c; c++) {
    int n;
    if (c[0] == '%' && c[1] == 'h') n = snprintf(out + o, len - o, "%s", collHostName()), c++;
    else if (c[0] == '%' && c[1] == 'p') n = snprintf(out + o, len - o, "%d", (int)getpid()), c++;
    else if (c[0] == '%' && c[1] == 'r') n = snprintf(out + o, len - o, "%d", comm->rank), c++;
    else if (c[0] == '%' && c[1] == 'c') n = snprintf(out + o, len - o, "%016llx", (unsigned long long)comm->commHash), c++;
    else n = snprintf(out + o, len - o, "%c", *c);
    if (n < 0 || (size_t)n >= len - o) return 0;
    o += (size_t)n;
  }
  return 1;
}

/* A COLL_* variable's bad path is reported once per process and variable
 * (a failing communicator dumps its flight recorder on failure, abort and
 * destroy; each communicator writes its stats): the first failure says it,
 * the later ones only at INFO. Other callers (API calls) warn every time. */
static int collObsWarnOnce(const char* var) {
  static const char* const vars[] = {"COLL_FR_FILE", "COLL_STATS_FILE", "COLL_TRACE_FILE"};
  static int warned[3];
  for (int i = 0; i < 3; i++)
    if (strcmp(var, vars[i]) == 0) return !__atomic_exchange_n(&warned[i], 1, __ATOMIC_RELAXED);
  return 1;
}

FILE* collObsOpen(collComm_t comm, const char* spec, const char* var, char* used, size_t usedLen) {
  char why[1200];
  FILE* f = NULL;
  if (!collObsPath(comm, spec, used, usedLen)) {
    snprintf(why, sizeof why, "%s=%s: the path is longer than %zu bytes; not written", var, spec, usedLen - 1);
  } else if (!(f = fopen(used, "we"))) {
    snprintf(why, sizeof why, "%s=%s: cannot open %s for writing: %s", var, spec, used, strerror(errno));
  }
  if (!f) {
    if (collObsWarnOnce(var)) COLL_WARN_ALWAYS(COLL_SUB_INIT, "%s", why);
    else COLL_INFO(COLL_SUB_INIT, "%s", why);
  }
  return f;
}

void collObsJsonStr(FILE* f, const char* s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

int64_t collObsRealtimeOffsetNs(void) {
  struct timespec m, r;
  clock_gettime(CLOCK_MONOTONIC, &m);
  clock_gettime(CLOCK_REALTIME, &r);
  return ((int64_t)r.tv_sec - (int64_t)m.tv_sec) * 1000000000LL + ((int64_t)r.tv_nsec - (int64_t)m.tv_nsec);
}

const char* collObsStateName(int state) {
  static const char* names[] = {"free", "running", "completed", "failed"};
  return state >= 0 && state < 4 ? names[state] : "?";
}
