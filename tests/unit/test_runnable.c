/*
 * test_runnable.c - the kernel's runnable tasks (engine/runnable.c): the
 * 4th field of /proc/loadavg, R of "R/T", and the state letter of
 * /proc/<pid>/stat; -1 for text not of that form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "engine/runnable.h"

static void test_parse(void** st) {
  (void)st;
  assert_int_equal(collParseRunnable("0.52 0.56 0.58 1/86 20254\n"), 1);
  assert_int_equal(collParseRunnable("3.69 1.56 0.93 12/110 10883"), 12);
  assert_int_equal(collParseRunnable("0.00 0.00 0.00 0/5 1"), 0);
  assert_int_equal(collParseRunnable("0.52 0.56 0.58 7/3 1"), -1); /* more runnable than tasks */
  assert_int_equal(collParseRunnable("0.52 0.56 0.58 -1/3 1"), -1);
  assert_int_equal(collParseRunnable("0.52 0.56 0.58"), -1);
  assert_int_equal(collParseRunnable(""), -1);
  assert_int_equal(collParseRunnable(NULL), -1);
}

static void test_parse_state(void** st) {
  (void)st;
  assert_int_equal(collParseTaskState("4242 (allreduce_perf) R 1 4242 0 0"), 'R');
  assert_int_equal(collParseTaskState("17 (a (b) c) S 1 17"), 'S'); /* the name's own parentheses */
  assert_int_equal(collParseTaskState("17 (x) ) D 1"), 'D');
  assert_int_equal(collParseTaskState("17 (x)R 1"), -1);
  assert_int_equal(collParseTaskState("17 (x) r 1"), -1);
  assert_int_equal(collParseTaskState("17 (x"), -1);
  assert_int_equal(collParseTaskState(NULL), -1);
}

/* This process runs while it reads: at least 1 runnable task, and its own
 * state is R; no process has pid 0 (unknown). */
static void test_this_machine(void** st) {
  (void)st;
  assert_true(collSysRunnable() >= 1);
  assert_int_equal(collTaskRunnable((int)getpid()), 1);
  assert_int_equal(collTaskRunnable(0), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_parse_state),
      cmocka_unit_test(test_this_machine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
