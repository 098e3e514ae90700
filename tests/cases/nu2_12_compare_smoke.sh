#!/usr/bin/env bash
# newuser2 finding 12: benchmarks/compare/run.sh --smoke listed noise as
# findings. table.py (which run.sh calls with --smoke for a smoke run) must
# say, at the top and in the findings' heading, that a smoke run's numbers
# and findings are not meaningful; without --smoke it must not. Input: two
# logs of one run (coll 3x slower than Open MPI at 64 KiB: one "finding").
# Also checks that run.sh passes --smoke. Instant.
set -u -o pipefail
SRC=${2:?usage: $0 BUILD_DIR SOURCE_DIR}
. "$SRC/tests/fixtures/compare_rows.sh" # $T, row
{ echo "# Collective test starting: allgather_perf"; row 65536 300; } >"$T/raw/coll.allgather.np2.run1.log"
{ echo "# Collective test starting: allgather_perf"; row 65536 100; } >"$T/raw/ompi.allgather.np2.run1.log"
FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
python3 "$SRC/benchmarks/compare/table.py" "$T" --libs "coll ompi" --colls allgather --nps 2 --smoke >"$T/smoke.md" ||
  bad "table.py --smoke failed: $(tail -3 "$T/smoke.md")"
grep -q '^\*\*Smoke run (run.sh --smoke).*findings are noise, not measurements' "$T/smoke.md" || bad "no smoke note at the top"
grep -q '^## Findings (smoke run: not meaningful)$' "$T/smoke.md" || bad "findings heading: $(grep '^## Findings' "$T/smoke.md")"
grep -q '^- allgather np=2 out-of-place: 64 KiB' "$T/smoke.md" || bad "the input's finding is missing: $(sed -n '/^## Findings/,$p' "$T/smoke.md" | head -8)"
python3 "$SRC/benchmarks/compare/table.py" "$T" --libs "coll ompi" --colls allgather --nps 2 >"$T/full.md" ||
  bad "table.py failed"
grep -qi 'smoke' "$T/full.md" && bad "a run without --smoke mentions smoke: $(grep -i smoke "$T/full.md")"
grep -q 'table.py.*\$(\[ "\$SMOKE" = 1 \] && echo --smoke)' "$SRC/benchmarks/compare/run.sh" || bad "run.sh does not pass --smoke to table.py"
[ "$FAILS" = 0 ] && echo "all passed: $(grep -c . "$T/smoke.md") lines, smoke noted"
exit $((FAILS > 0))
