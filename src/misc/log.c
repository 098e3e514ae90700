/* log.c - COLL_DEBUG / COLL_DEBUG_SUBSYS logging and collGetLastError. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "param.h"

int collLogLevel = -1; /* -1: not yet resolved */
static int collLogSubsys = COLL_SUB_ALL;
static FILE* collLogFile;
static pthread_once_t collLogOnce = PTHREAD_ONCE_INIT;
static pthread_mutex_t collLogLock = PTHREAD_MUTEX_INITIALIZER;
static char collHost[64];

static _Thread_local char collLastError[1024];

static const struct {
  const char* name;
  int bit;
} collSubsysNames[] = {{"INIT", COLL_SUB_INIT}, {"BOOT", COLL_SUB_BOOT},
                       {"NET", COLL_SUB_NET},   {"COLL", COLL_SUB_COLL},
                       {"ENGINE", COLL_SUB_ENGINE}, {"TUNE", COLL_SUB_TUNE},
                       {"TUNING", COLL_SUB_TUNE}, {"ENV", COLL_SUB_ENV},
                       {"ALL", COLL_SUB_ALL}};

#define COLL_SUB_DEFAULT (COLL_SUB_INIT | COLL_SUB_ENV | COLL_SUB_BOOT | COLL_SUB_NET)
#define COLL_NSUBSYS (sizeof collSubsysNames / sizeof collSubsysNames[0])

/* Warnings about the logging settings themselves: found while the logger is
 * being set up (inside its pthread_once, where logging would recurse), and
 * printed by collLogInit right after. */
static char collLogSetupWarn[3][400];
static int collLogSetupWarnN, collLogSetupWarned;

static void collLogSetupWarning(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void collLogSetupWarning(const char* fmt, ...) {
  if (collLogSetupWarnN >= (int)(sizeof collLogSetupWarn / sizeof collLogSetupWarn[0])) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(collLogSetupWarn[collLogSetupWarnN++], sizeof collLogSetupWarn[0], fmt, ap);
  va_end(ap);
}

/* "INIT,NET" style names of a mask (ALL when every bit is set). */
static void collSubsysFormat(int mask, char* buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  if (mask == COLL_SUB_ALL) {
    snprintf(buf, len, "ALL");
    return;
  }
  for (size_t i = 0; i < COLL_NSUBSYS; i++) {
    int bit = collSubsysNames[i].bit;
    if (bit == COLL_SUB_ALL || strcmp(collSubsysNames[i].name, "TUNING") == 0 || !(mask & bit)) continue;
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "," : "", collSubsysNames[i].name);
  }
  if (!buf[0]) snprintf(buf, len, "none");
}

/* Parses "INIT,NET" or "^ENGINE" into a subsystem mask. Unknown names are
 * reported; a list of nothing but unknown names gives the default mask. */
static int collParseSubsys(const char* spec) {
  if (!spec || !*spec) return COLL_SUB_DEFAULT;
  const char* whole = spec;
  int invert = spec[0] == '^';
  if (invert) spec++;
  int mask = 0, known = 0;
  char buf[256], unknown[256] = "";
  size_t uo = 0;
  snprintf(buf, sizeof buf, "%s", spec);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    size_t i;
    for (i = 0; i < COLL_NSUBSYS; i++)
      if (strcasecmp(tok, collSubsysNames[i].name) == 0) break;
    if (i < COLL_NSUBSYS) {
      mask |= collSubsysNames[i].bit;
      known++;
    } else {
      uo += (size_t)snprintf(unknown + uo, uo < sizeof unknown ? sizeof unknown - uo : 0, "%s\"%s\"", uo ? ", " : "",
                             tok);
    }
  }
  int result = invert ? ~mask : mask;
  if (!known && !invert) result = COLL_SUB_DEFAULT;
  if (unknown[0] || !known) {
    char used[128];
    collSubsysFormat(result, used, sizeof used);
    collLogSetupWarning("COLL_DEBUG_SUBSYS=%s: %s %s (known: INIT, BOOT, NET, COLL, ENGINE, TUNE or TUNING, ENV, ALL; "
                        "^ excludes); using %s",
                        whole, unknown[0] ? "unknown subsystem" : "no subsystem named", unknown[0] ? unknown : "",
                        used);
  }
  return result;
}

/* Expands %h (host) and %p (pid) as NCCL_DEBUG_FILE; 0 if it does not fit. */
static int collLogFilePath(const char* spec, char* path, size_t len) {
  size_t o = 0;
  for (const char* c = spec; *c; c++) {
    int n;
    if (c[0] == '%' && c[1] == 'h') n = snprintf(path + o, len - o, "%s", collHost), c++;
    else if (c[0] == '%' && c[1] == 'p') n = snprintf(path + o, len - o, "%d", (int)getpid()), c++;
    else n = snprintf(path + o, len - o, "%c", *c);
    if (n < 0 || (size_t)n >= len - o) return 0;
    o += (size_t)n;
  }
  return 1;
}

static void collLogInitOnce(void) {
  if (gethostname(collHost, sizeof collHost - 1) != 0) strcpy(collHost, "unknown");
  char* dot = strchr(collHost, '.');
  if (dot) *dot = 0;
  const char* lvl = collParamStr(COLL_SPARAM_DEBUG);
  int level = COLL_LOG_NONE;
  if (lvl) {
    if (strcasecmp(lvl, "WARN") == 0) level = COLL_LOG_WARN;
    else if (strcasecmp(lvl, "INFO") == 0) level = COLL_LOG_INFO;
    else if (strcasecmp(lvl, "TRACE") == 0) level = COLL_LOG_TRACE;
    else if (strcasecmp(lvl, "VERSION") == 0) level = COLL_LOG_WARN;
    else
      collLogSetupWarning("COLL_DEBUG=%s is not WARN, INFO, TRACE or VERSION; using the default (unset: no log but "
                          "warnings like this one)",
                          lvl);
  }
  collLogSubsys = collParseSubsys(collParamStr(COLL_SPARAM_DEBUG_SUBSYS));
  collLogFile = stderr;
  const char* file = collParamStr(COLL_SPARAM_DEBUG_FILE);
  if (file && *file) {
    char path[512];
    FILE* f = NULL;
    if (!collLogFilePath(file, path, sizeof path))
      collLogSetupWarning("COLL_DEBUG_FILE=%s: the path is longer than %zu bytes; logging to stderr", file,
                          sizeof path - 1);
    else if (!(f = fopen(path, "we")))
      collLogSetupWarning("COLL_DEBUG_FILE=%s: cannot open %s for writing (%s); logging to stderr", file, path,
                          strerror(errno));
    if (f) collLogFile = f;
  }
  __atomic_store_n(&collLogLevel, level, __ATOMIC_RELEASE);
}

void collLogInit(void) {
  pthread_once(&collLogOnce, collLogInitOnce);
  if (collLogSetupWarnN && !__atomic_exchange_n(&collLogSetupWarned, 1, __ATOMIC_ACQ_REL))
    for (int i = 0; i < collLogSetupWarnN; i++) COLL_WARN_ALWAYS(COLL_SUB_ENV, "%s", collLogSetupWarn[i]);
  collParamInit(); /* its warnings at init too, not at first use */
}

const char* collHostName(void) {
  pthread_once(&collLogOnce, collLogInitOnce);
  return collHost;
}

int collLogEnabled(int level, int subsys) {
  pthread_once(&collLogOnce, collLogInitOnce);
  return level <= collLogLevel && (level <= COLL_LOG_WARN || (subsys & collLogSubsys));
}

void collLog(int level, int subsys, const char* file, int line, const char* fmt, ...) {
  pthread_once(&collLogOnce, collLogInitOnce);
  if (level > collLogLevel) return;
  if (level > COLL_LOG_WARN && !(subsys & collLogSubsys)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  static const char* names[] = {"WARN", "WARN", "INFO", "TRACE"}; /* NONE: COLL_WARN_ALWAYS */
  pthread_mutex_lock(&collLogLock);
  if (level == COLL_LOG_TRACE)
    fprintf(collLogFile, "%s:%d:%ld [coll] %s %s:%d %s\n", collHost, (int)getpid(),
            (long)syscall(SYS_gettid), names[level], base ? base + 1 : file, line, msg);
  else
    fprintf(collLogFile, "%s:%d:%ld [coll] %s %s\n", collHost, (int)getpid(),
            (long)syscall(SYS_gettid), names[level], msg);
  fflush(collLogFile);
  pthread_mutex_unlock(&collLogLock);
}

static _Thread_local int collErrorsQuiet;

int collQuietErrors(int on) {
  int was = collErrorsQuiet;
  collErrorsQuiet = on;
  return was;
}

collResult_t collSetError(collResult_t code, const char* fmt, ...) {
  /* Format aside first: callers often pass collLastErrorMessage() itself. */
  char msg[sizeof collLastError];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(collLastError, msg, sizeof msg);
  if (!collErrorsQuiet)
    collLog(COLL_LOG_WARN, COLL_SUB_ALL, __FILE__, __LINE__, "%s (%s)", collLastError,
          collGetErrorString(code));
  return code;
}

void collClearError(void) { collLastError[0] = 0; }

static _Thread_local int collApiDepth;

void collApiEnter(void) {
  if (collApiDepth++ == 0) collLastError[0] = 0;
}

collResult_t collApiLeave(collResult_t r) {
  if (--collApiDepth == 0 && (r == collSuccess || r == collInProgress)) collLastError[0] = 0;
  return r;
}
const char* collLastErrorMessage(void) { return collLastError; }
