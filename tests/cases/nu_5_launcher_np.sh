#!/usr/bin/env bash
# New user's finding 5: `mpirun -np 2 allreduce_perf -np 2` (a launcher's
# environment AND -np) is refused like -t > 1 is, instead of every launched
# copy running its own separate -np job (two full tables). Checked with the
# variables of torchrun (RANK/WORLD_SIZE), Open MPI and Slurm, each as rank 0
# of 2; and -np under a launcher of 1 rank still runs.
# Usage: nu_5_launcher_np.sh BUILD_DIR SOURCE_DIR
set -u
B=${1:?build dir}
BIN="$B/benchmarks/allreduce_perf"
[ -x "$BIN" ] || { echo "no $BIN"; exit 1; }
out=$(mktemp /tmp/coll-nu5.XXXXXX)
trap 'rm -f "$out"' EXIT
fail=0
clean() { env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE \
  -u SLURM_PROCID -u SLURM_NTASKS -u MASTER_ADDR -u MASTER_PORT "$@"; }
for vars in "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1" \
            "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2" "SLURM_PROCID=0 SLURM_NTASKS=2"; do
  # shellcheck disable=SC2086
  clean $vars timeout 30 "$BIN" -np 2 -b 8 -e 8 -n 1 -w 0 >"$out" 2>&1
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q -- "-np > 1 is not supported under a launcher (2 ranks found" "$out"; then
    echo "FAIL: $vars allreduce_perf -np 2: exit $rc, expected a refusal:"
    tail -5 "$out"
    fail=1
  else
    echo "ok: $vars -np 2: $(grep -- '-np > 1' "$out")"
  fi
done
if ! clean RANK=0 WORLD_SIZE=1 timeout 60 "$BIN" -np 2 -b 8 -e 8 -n 1 -w 0 >"$out" 2>&1; then
  echo "FAIL: -np 2 under a 1-rank launcher environment:"
  tail -5 "$out"
  fail=1
else
  echo "ok: -np 2 under a 1-rank launcher environment runs"
fi
exit $fail
