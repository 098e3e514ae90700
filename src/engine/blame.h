/* blame.h - process states of peers on this host, for failure messages
 * (blame.c; collEngineBlame is declared in engine.h). */
#ifndef COLL_BLAME_H_
#define COLL_BLAME_H_

struct collComm;

/* State letter of process pid from /proc/<pid>/stat ('R', 'S', 'D', 'T',
 * 't', 'Z'...), 'X' if there is no such process, 0 if unknown. */
char collProcState(int pid);
/* Words for a state that means "stopped progressing" ("has exited", "is
 * stopped ..."), or NULL for a live, running or waiting process. */
const char* collProcStateWords(char st);
/* 1 if peer's pid can be looked up here: same host and kernel, not us. */
int collBlameSameHost(const struct collComm* comm, int peer);

#endif
