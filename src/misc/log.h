/* log.h - COLL_DEBUG logging and the thread-local last-error message. */
#ifndef COLL_LOG_H_
#define COLL_LOG_H_

#include "coll.h"

/* COLL_LOG_NONE (COLL_DEBUG unset) still prints COLL_WARN_ALWAYS messages. */
enum { COLL_LOG_NONE = 0, COLL_LOG_WARN = 1, COLL_LOG_INFO = 2, COLL_LOG_TRACE = 3 };

/* Subsystems for COLL_DEBUG_SUBSYS (comma list, ^ to exclude, ALL). */
enum {
  COLL_SUB_INIT = 1 << 0,
  COLL_SUB_BOOT = 1 << 1,
  COLL_SUB_NET = 1 << 2,
  COLL_SUB_COLL = 1 << 3,
  COLL_SUB_ENGINE = 1 << 4,
  COLL_SUB_TUNE = 1 << 5,
  COLL_SUB_ENV = 1 << 6,
  COLL_SUB_ALL = ~0
};

extern int collLogLevel;         /* from COLL_DEBUG, resolved lazily */
void collLogInit(void);           /* idempotent */
/* 1 when a message of this level and subsystem would be printed. */
int collLogEnabled(int level, int subsys);
void collLog(int level, int subsys, const char* file, int line,
             const char* fmt, ...) __attribute__((format(printf, 5, 6)));

#define COLL_WARN(sub, ...) collLog(COLL_LOG_WARN, sub, __FILE__, __LINE__, __VA_ARGS__)
/* A setting that is not used as given (say what is used instead), or
 * anything else the user must see: printed labelled WARN whatever COLL_DEBUG
 * says, also when it is unset. */
#define COLL_WARN_ALWAYS(sub, ...) collLog(COLL_LOG_NONE, sub, __FILE__, __LINE__, __VA_ARGS__)
/* COLL_WARN_ALWAYS at most once per process from this call site. */
#define COLL_WARN_ONCE(sub, ...)                                              \
  do {                                                                        \
    static int collWarnedOnce_;                                               \
    if (!__atomic_exchange_n(&collWarnedOnce_, 1, __ATOMIC_RELAXED))          \
      COLL_WARN_ALWAYS(sub, __VA_ARGS__);                                     \
  } while (0)
#define COLL_INFO(sub, ...)                                                   \
  do {                                                                        \
    if (collLogLevel >= COLL_LOG_INFO || collLogLevel < 0)                    \
      collLog(COLL_LOG_INFO, sub, __FILE__, __LINE__, __VA_ARGS__);           \
  } while (0)
#define COLL_TRACE(sub, ...)                                                  \
  do {                                                                        \
    if (collLogLevel >= COLL_LOG_TRACE || collLogLevel < 0)                   \
      collLog(COLL_LOG_TRACE, sub, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

/* Records the message returned by collGetLastError on this thread, logs it
 * at WARN, and returns `code` so callers can write
 *   return collSetError(collInvalidArgument, "count %zu ...", count); */
collResult_t collSetError(collResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void collClearError(void);
/* 1: collSetError on this thread records without logging (a probe whose
 * failure is expected and reported otherwise); returns the previous value. */
int collQuietErrors(int on);
const char* collLastErrorMessage(void);

/* Public entry points (src/core/api.c) bracket each call with these: the
 * outermost call on a thread clears the message at entry, and again when it
 * returns collSuccess or collInProgress, so that collGetLastError describes
 * the last call only (nested public calls, e.g. cleanup after a failure,
 * leave it alone). collApiLeave returns r. */
void collApiEnter(void);
collResult_t collApiLeave(collResult_t r);

/* Short host name and process id used in messages and logs. */
const char* collHostName(void);

#endif
