#!/usr/bin/env bash
# issue 14 point 6: tests/run_all.sh runs every stage even when one fails
# (gcc + ctest, clang, asan + ctest, fuzz), prints each stage's wall time and
# a summary table, and exits non-zero when any stage failed.
# The real run_all.sh and tests/fuzz/run.sh run in a scratch copy of the
# tree against fake cmake and ctest (first in PATH) that build nothing and
# fail where a scenario says; the fake fuzz targets pass. Scenarios: gcc's
# ctest fails; clang's build fails; asan's ctest fails; everything passes.
# Then .ci/run (install + run_all.sh) with a stub install that takes 1 s:
# it prints the install's time, runs the tests also when the install
# failed, and its exit status says whether both passed.
# Before the fix the script stopped at the first failing stage.
# Usage: i14_6_run_all.sh BUILD_DIR SOURCE_DIR
set -u
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/tree/tests/fuzz" "$work/tree/.ci" "$work/bin"
cp "$src/.ci/run" "$work/tree/.ci/"
printf '#!/usr/bin/env bash\necho "stub install"; sleep 1; exit "${FAKE_INSTALL_RC:-0}"\n' > "$work/tree/.ci/install-deps"
cp "$src/tests/run_all.sh" "$work/tree/tests/"
cp "$src/tests/fuzz/run.sh" "$work/tree/tests/fuzz/"
cp -r "$src/tests/fuzz/corpus" "$work/tree/tests/fuzz/"

# fake cmake: configure makes the dir; --build DIR fails if DIR ends in
# $FAKE_FAIL_BUILD, and for a fuzz build writes passing fake targets.
cat > "$work/bin/cmake" <<'EOF'
#!/usr/bin/env bash
echo "cmake $*" >> "$FAKE_LOG"
dir=""
while [ $# -gt 0 ]; do
  case $1 in
    -B) dir=$2; mkdir -p "$dir"; shift ;;
    --build) dir=$2; shift
      [ -n "${FAKE_FAIL_BUILD:-}" ] && [ "${dir%/$FAKE_FAIL_BUILD}" != "$dir" ] && { echo "fake build of $dir fails"; exit 2; }
      if [ "${dir%fuzz}" != "$dir" ]; then
        mkdir -p "$dir/tests/fuzz"
        for t in $(sed -n 's/^for t in \(.*\); do$/\1/p' "$FAKE_FUZZ_RUN"); do
          printf '#!/bin/sh\necho "fuzz_%s ran" >> "$FAKE_LOG"; echo "Done 10 runs"\n' "$t" > "$dir/tests/fuzz/fuzz_$t"
          chmod +x "$dir/tests/fuzz/fuzz_$t"
        done
      fi ;;
  esac
  shift
done
exit 0
EOF
# fake ctest: takes FAKE_CTEST_SLEEP seconds, fails for --test-dir .../$FAKE_FAIL_CTEST
cat > "$work/bin/ctest" <<'EOF'
#!/usr/bin/env bash
echo "ctest $*" >> "$FAKE_LOG"
sleep "${FAKE_CTEST_SLEEP:-0}"
while [ $# -gt 0 ]; do
  [ "$1" = --test-dir ] && [ -n "${FAKE_FAIL_CTEST:-}" ] && [ "${2%/$FAKE_FAIL_CTEST}" != "$2" ] && {
    echo "fake ctest in $2: 1 test failed"; exit 8; }
  shift
done
exit 0
EOF
chmod +x "$work/bin/cmake" "$work/bin/ctest"

fails=0
# scenario NAME EXPECTED_RC EXPECTED_SUMMARY_LINES... (regexes, one per stage + total)
scenario() {
  local name=$1 want_rc=$2
  shift 2
  : > "$work/log"
  local out rc
  out=$(cd "$work" && PATH="$work/bin:$PATH" FAKE_LOG="$work/log" FAKE_FUZZ_RUN="$src/tests/fuzz/run.sh" COLL_FUZZ_SECONDS=1 FAKE_CTEST_SLEEP=1 \
        timeout 120 bash tree/tests/run_all.sh "$work/build" 2>&1)
  rc=$?
  local bad=0
  if [ "$want_rc" = 0 ]; then [ "$rc" = 0 ] || bad=1; else [ "$rc" != 0 ] || bad=1; fi
  # every stage ran: both ctest suites, the clang build, the three fuzz targets
  grep -q "ctest --test-dir $work/build/gcc" "$work/log" || bad=1
  grep -q -- "--build $work/build/clang" "$work/log" || bad=1
  grep -q "ctest --test-dir $work/build/asan" "$work/log" || bad=1
  for t in bootstrap tcp_frames shm_handshake; do grep -q "fuzz_$t ran" "$work/log" || bad=1; done
  # each stage's end line has its time; the summary has one line per stage
  for s in gcc clang asan fuzz; do
    grep -Eq "^=== $s: (passed|FAILED \(exit [0-9]+\)) in [0-9]+ s" <<< "$out" || bad=1
  done
  grep -q '^=== summary ===$' <<< "$out" || bad=1
  local summary
  summary=$(sed -n '/^=== summary ===$/,$p' <<< "$out")
  for re in "$@"; do grep -Eq "$re" <<< "$summary" || { echo "  summary lacks /$re/"; bad=1; }; done
  # a ctest stage takes at least the fake ctest's 1 s
  grep -Eq '^gcc +[a-zA-Z ()0-9]+ +[1-9][0-9]* s' <<< "$summary" || bad=1
  echo "$name: exit $rc: $([ "$bad" = 0 ] && echo ok || echo FAILED)"
  if [ "$bad" != 0 ]; then
    echo "  output:"; sed 's/^/    /' <<< "$out"
    fails=$((fails + 1))
  fi
}

FAKE_FAIL_CTEST=gcc scenario "gcc ctest fails" 1 \
  '^gcc +FAILED \(exit 8\) +[0-9]+ s' '^clang +passed +[0-9]+ s' '^asan +passed' '^fuzz +passed' '^total +FAILED'
FAKE_FAIL_BUILD=clang scenario "clang build fails" 1 \
  '^gcc +passed' '^clang +FAILED \(exit 2\)' '^asan +passed' '^fuzz +passed' '^total +FAILED'
FAKE_FAIL_CTEST=asan scenario "asan ctest fails" 1 \
  '^gcc +passed' '^clang +passed' '^asan +FAILED \(exit 8\)' '^fuzz +passed' '^total +FAILED'
scenario "all pass" 0 '^gcc +passed' '^clang +passed' '^asan +passed' '^fuzz +passed' '^total +passed'
# .ci/run: NAME INSTALL_RC EXPECTED_RC
ci() {
  : > "$work/log"
  local out rc bad=0
  out=$(cd "$work" && PATH="$work/bin:$PATH" FAKE_LOG="$work/log" FAKE_FUZZ_RUN="$src/tests/fuzz/run.sh" COLL_FUZZ_SECONDS=1 FAKE_INSTALL_RC=$2 \
        timeout 120 bash tree/.ci/run 2>&1)
  rc=$?
  if [ "$3" = 0 ]; then [ "$rc" = 0 ] || bad=1; else [ "$rc" != 0 ] || bad=1; fi
  grep -Eq "^=== install: $([ "$2" = 0 ] && echo passed || echo 'FAILED \(exit [0-9]+\)') in [1-9][0-9]* s ===$" <<< "$out" || bad=1
  grep -q "ctest --test-dir build-ci/asan" "$work/log" || bad=1
  grep -Eq '^total +passed' <<< "$out" || bad=1
  grep -Eq "^=== .ci/run: install $([ "$2" = 0 ] && echo passed || echo FAILED), tests passed; [0-9]+ s in all ===$" \
    <<< "$out" || bad=1
  echo "$1: exit $rc: $([ "$bad" = 0 ] && echo ok || echo FAILED)"
  if [ "$bad" != 0 ]; then
    echo "  output:"; sed 's/^/    /' <<< "$out"
    fails=$((fails + 1))
  fi
}
ci ".ci/run, install passes" 0 0
ci ".ci/run, install fails" 3 1
echo "i14_6_run_all: $fails failed"
[ "$fails" = 0 ]
