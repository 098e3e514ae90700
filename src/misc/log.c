/* log.c - COLL_DEBUG / COLL_DEBUG_SUBSYS logging and collGetLastError. */
#include "log.h"

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

/* Parses "INIT,NET" or "^ENGINE" into a subsystem mask. */
static int collParseSubsys(const char* spec) {
  if (!spec || !*spec) return COLL_SUB_INIT | COLL_SUB_ENV | COLL_SUB_BOOT | COLL_SUB_NET;
  int invert = spec[0] == '^';
  if (invert) spec++;
  int mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < sizeof collSubsysNames / sizeof collSubsysNames[0]; i++)
      if (strcasecmp(tok, collSubsysNames[i].name) == 0) mask |= collSubsysNames[i].bit;
  }
  return invert ? ~mask : mask;
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
  }
  collLogSubsys = collParseSubsys(collParamStr(COLL_SPARAM_DEBUG_SUBSYS));
  collLogFile = stderr;
  const char* file = collParamStr(COLL_SPARAM_DEBUG_FILE);
  if (file && *file) {
    /* %h = host, %p = pid, as NCCL_DEBUG_FILE */
    char path[512];
    size_t o = 0;
    for (const char* c = file; *c && o + 32 < sizeof path; c++) {
      if (c[0] == '%' && c[1] == 'h') { o += (size_t)snprintf(path + o, sizeof path - o, "%s", collHost); c++; }
      else if (c[0] == '%' && c[1] == 'p') { o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid()); c++; }
      else path[o++] = *c;
    }
    path[o] = 0;
    FILE* f = fopen(path, "we");
    if (f) collLogFile = f;
  }
  __atomic_store_n(&collLogLevel, level, __ATOMIC_RELEASE);
}

void collLogInit(void) { pthread_once(&collLogOnce, collLogInitOnce); }

const char* collHostName(void) {
  collLogInit();
  return collHost;
}

int collLogEnabled(int level, int subsys) {
  collLogInit();
  return level <= collLogLevel && (level <= COLL_LOG_WARN || (subsys & collLogSubsys));
}

void collLog(int level, int subsys, const char* file, int line, const char* fmt, ...) {
  collLogInit();
  if (level > collLogLevel) return;
  if (level > COLL_LOG_WARN && !(subsys & collLogSubsys)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
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

collResult_t collSetError(collResult_t code, const char* fmt, ...) {
  /* Format aside first: callers often pass collLastErrorMessage() itself. */
  char msg[sizeof collLastError];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(collLastError, msg, sizeof msg);
  collLog(COLL_LOG_WARN, COLL_SUB_ALL, __FILE__, __LINE__, "%s (%s)", collLastError,
          collGetErrorString(code));
  return code;
}

void collClearError(void) { collLastError[0] = 0; }
const char* collLastErrorMessage(void) { return collLastError; }
