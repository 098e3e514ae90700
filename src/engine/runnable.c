/* runnable.c - the kernel's runnable tasks (runnable.h). */
#include "engine/runnable.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int collParseRunnable(const char* text) {
  double a1, a5, a15;
  int running, total;
  if (!text || sscanf(text, "%lf %lf %lf %d/%d", &a1, &a5, &a15, &running, &total) != 5 || running < 0 ||
      total < running)
    return -1;
  return running;
}

int collParseTaskState(const char* text) {
  const char* close = text ? strrchr(text, ')') : NULL; /* the command name ends at the last ')' */
  if (!close || close[1] != ' ' || close[2] < 'A' || close[2] > 'Z') return -1;
  return close[2];
}

/* Reads a small /proc file into buf; 0, or -1 when it cannot. */
static int collReadProc(const char* path, char* buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  return 0;
}

int collSysRunnable(void) {
  char buf[128];
  return collReadProc("/proc/loadavg", buf, sizeof buf) == 0 ? collParseRunnable(buf) : -1;
}

int collTaskRunnable(int pid) {
  char path[40], buf[256]; /* the state follows the pid and a command name of at most 15 bytes */
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int s = pid > 0 && collReadProc(path, buf, sizeof buf) == 0 ? collParseTaskState(buf) : -1;
  return s < 0 ? -1 : s == 'R';
}
