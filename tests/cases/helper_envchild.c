/* helper_envchild.c - see helper_envchild.h. */
#include "helper_envchild.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double nowSec(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int envChildRun(const char* const* env, int (*body)(void*), void* arg, char* out, size_t len, int timeoutSec) {
  int p[2];
  out[0] = 0;
  if (pipe(p) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    static const char* const clear[] = {"COLL_DEBUG", "COLL_DEBUG_SUBSYS", "COLL_DEBUG_FILE", "COLL_ALGO",
                                        "COLL_TUNER_PLUGIN"};
    for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++) unsetenv(clear[i]);
    for (int i = 0; env && env[i]; i++) {
      char name[256];
      const char* eq = strchr(env[i], '=');
      size_t n = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
      if (n >= sizeof name) _exit(120);
      memcpy(name, env[i], n);
      name[n] = 0;
      if (eq) setenv(name, eq + 1, 1);
      else unsetenv(name);
    }
    dup2(p[1], 1);
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    setvbuf(stdout, NULL, _IONBF, 0);
    alarm((unsigned)timeoutSec);
    int rc = body(arg);
    fflush(NULL);
    _exit(rc);
  }
  close(p[1]);
  size_t got = 0;
  double deadline = nowSec() + timeoutSec + 5;
  int timedOut = 0;
  for (;;) {
    struct pollfd pf = {p[0], POLLIN, 0};
    int left = (int)((deadline - nowSec()) * 1000);
    if (left <= 0) {
      timedOut = 1;
      break;
    }
    int k = poll(&pf, 1, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) continue;
    char buf[4096];
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t keep = got + (size_t)n < len ? (size_t)n : len - 1 - got;
    memcpy(out + got, buf, keep);
    got += keep;
    out[got] = 0;
  }
  close(p[0]);
  if (timedOut) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timedOut || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

int envChildLines(const char* text, const char* needle) {
  int n = 0;
  for (const char* line = text; line && *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char* hit = strstr(line, needle);
    if (hit && (size_t)(hit - line) + strlen(needle) <= len) n++;
    line = end ? end + 1 : NULL;
  }
  return n;
}

int envChildPrefixed(const char* text, const char* needle, int pid) {
  char host[256], prefix[300];
  if (gethostname(host, sizeof host) != 0) return 0;
  host[sizeof host - 1] = 0;
  char* dot = strchr(host, '.');
  if (dot) *dot = 0;
  snprintf(prefix, sizeof prefix, "%s:%d:", host, pid);
  for (const char* line = text; line && *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char* hit = strstr(line, needle);
    if (hit && (size_t)(hit - line) + strlen(needle) <= len && strncmp(line, prefix, strlen(prefix)) != 0) return 0;
    line = end ? end + 1 : NULL;
  }
  return 1;
}
