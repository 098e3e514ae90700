/* runnable.h - which tasks the kernel can run right now (progress.c). */
#ifndef COLL_RUNNABLE_H_
#define COLL_RUNNABLE_H_

/* The tasks (threads) runnable on the whole machine at this moment, the
 * caller included: the 4th field of /proc/loadavg ("R/T"), an instantaneous
 * count, not an average. -1 when it cannot be read. One open/read/close
 * (some microseconds): for rare events only. Thread-safe. */
int collSysRunnable(void);
/* Whether process pid's main thread is running or runnable now (state R
 * in /proc/<pid>/stat): 1 yes, 0 no, -1 unknown (no such process, no
 * /proc). Same cost and thread-safety as collSysRunnable. */
int collTaskRunnable(int pid);

/* Parsers of the texts above (alone in this file with the readers, so that
 * a unit test can supply its own readers): the runnable count R of
 * /proc/loadavg ("0.52 0.56 0.58 R/T PID"), and the state letter of
 * /proc/<pid>/stat ("PID (COMM) STATE ...", COMM may hold spaces and
 * parentheses); -1 when text is NULL or not of that form. */
int collParseRunnable(const char* text);
int collParseTaskState(const char* text);

#endif
