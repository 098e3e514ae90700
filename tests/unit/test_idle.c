/*
 * test_idle.c - what a sleeping wait (engine/progress.c, phase 3) polls: a
 * send comm whose transport gives it no fd (ib: a completion never makes an
 * fd writable) sleeps on that transport's listen fd for POLLIN, which ib
 * makes readable on any of its completions; before, the wait only yielded,
 * a busy loop on an otherwise idle core. A send comm with its own fd is
 * polled for POLLOUT as before, and the listen fd is not asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/comm.h"
#include "engine/progress.h"
#include "misc/socket.h"

static int listenFd = -1, sendFd = -1; /* what the fake transport's comms give */
static int listenAsked, sendAsked;
static char listenComm, sendComm;

static collResult_t fakePollFd(void* comm, int* fd) {
  if (comm == &listenComm) {
    listenAsked++;
    *fd = listenFd;
  } else {
    sendAsked++;
    *fd = sendFd;
  }
  return collSuccess;
}

static const collNet_t fake = {.name = "fake", .getPollFd = fakePollFd};

static struct collComm C;

static void setup(void) {
  memset(&C, 0, sizeof C);
  C.nranks = 2;
  C.spinUs = 0; /* sleep on the first idle step */
  C.nets[1] = &fake;
  C.listenComms[1] = &listenComm;
  listenAsked = sendAsked = 0;
}

/* One idle step of a wait on the send comm; returns its seconds. */
static double idleSendStep(void) {
  collIdle w;
  collIdleInit(&C, &w);
  collIdleAdd(&w, &fake, &sendComm, POLLOUT);
  double t0 = collTimeNow();
  assert_int_equal(collIdleStep(&C, &w, 0, "test", 1), collSuccess);
  return collTimeNow() - t0;
}

/* No fd of its own: the listen fd is polled for POLLIN. Readable: the step
 * returns at once; not readable: it sleeps the whole 5 ms poll (a yield
 * would return at once on this idle core). */
static void test_send_without_fd_sleeps_on_listen_fd(void** st) {
  (void)st;
  setup();
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  assert_true(efd >= 0);
  listenFd = efd;
  sendFd = -1;
  double idle = idleSendStep();
  assert_int_equal(sendAsked, 1);
  assert_int_equal(listenAsked, 1);
  assert_true(idle >= 4e-3); /* poll() cannot return early without an event */
  uint64_t one = 1;
  assert_int_equal(write(efd, &one, sizeof one), (ssize_t)sizeof one);
  double woke = idleSendStep();
  assert_int_equal(listenAsked, 2);
  assert_true(woke < idle); /* readable: no 5 ms sleep */
  close(efd);
  listenFd = -1;
}

/* Without a listen comm either: nothing to poll, the step still returns. */
static void test_send_without_any_fd(void** st) {
  (void)st;
  setup();
  C.listenComms[1] = NULL;
  sendFd = -1;
  idleSendStep();
  assert_int_equal(sendAsked, 1);
  assert_int_equal(listenAsked, 0);
}

/* A send comm with an fd: polled for POLLOUT (a pipe's write end is
 * writable: no sleep), the listen fd is not asked for. */
static void test_send_with_fd_polls_it(void** st) {
  (void)st;
  setup();
  int p[2];
  assert_int_equal(pipe(p), 0);
  sendFd = p[1];
  listenFd = p[0]; /* never readable: polling it would sleep 5 ms */
  double t = idleSendStep();
  assert_int_equal(sendAsked, 1);
  assert_int_equal(listenAsked, 0);
  (void)t;
  close(p[0]);
  close(p[1]);
  sendFd = listenFd = -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_send_without_fd_sleeps_on_listen_fd),
      cmocka_unit_test(test_send_without_any_fd),
      cmocka_unit_test(test_send_with_fd_polls_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
