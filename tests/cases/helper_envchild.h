/*
 * helper_envchild.h - runs a test body in a forked child with its own
 * environment and captures what it prints: coll reads its settings once per
 * process, so each scenario of a settings test needs a fresh process. The
 * calling process must not have used coll before (it would pass its cached
 * settings on to the child). Linked by the .cmake of the cases that use it.
 */
#ifndef COLL_HELPER_ENVCHILD_H_
#define COLL_HELPER_ENVCHILD_H_

#include <stddef.h>

/* Forks; the child unsets COLL_DEBUG, COLL_DEBUG_SUBSYS, COLL_DEBUG_FILE,
 * COLL_ALGO and COLL_TUNER_PLUGIN, applies env (NULL-terminated "NAME=VALUE"
 * entries; "NAME=" sets it empty), sends stdout and stderr into out and runs
 * body(arg), whose return value is its exit status. out gets everything
 * printed (NUL-terminated, truncated to len). Returns the exit status, or -1
 * if the child crashed or ran past timeoutSec (it is killed then). */
int envChildRun(const char* const* env, int (*body)(void*), void* arg, char* out, size_t len, int timeoutSec);

/* Number of lines of text that contain needle. */
int envChildLines(const char* text, const char* needle);

/* 1 when every line of text containing needle starts with this host's short
 * name, ':', pid and ':' (the logger's prefix). */
int envChildPrefixed(const char* text, const char* needle, int pid);

#endif
