#!/usr/bin/env bash
# tuner_check.sh - how good is the tuner's choice? For each size, every
# algorithm of a collective is timed once forced (COLL_ALGO=<coll>:<algo>) and
# once left to the tuner; the table shows the out-of-place time (us) of each,
# the algorithm the tuner picked, the best forced one, pick/best (the forced
# time of the picked algorithm over the fastest forced time: how good the
# choice is, with every time taken under the same conditions) and tuner/best
# (the tuner's own run over the fastest forced time: includes the noise
# between two runs of one configuration). > 1 means slower; "!" flags > 1.15.
#
#   benchmarks/tuner_check.sh [-np N] [-b 8] [-e 256M] [-f 4] [-c COLLS]
#       [-a ALGOS] [-R 1] [-o FILE] [-B BUILD_DIR] [-t SEC] [--check-all]
#       [--min] [--calibrate] [--netns KxM [-r RATE]] [--8rank-small] [--smoke]
#
#   -np N        local ranks (forked by the *_perf binaries; default 4)
#   -b/-e/-f     sizes: b, b*f, b*f^2... <= e, and e itself (default 8, 256M, 4)
#   -c COLLS     collectives, comma list of allreduce, allgather, reducescatter,
#                broadcast, reduce (default: all locally, allreduce with --netns)
#   -a ALGOS     force only these algorithms (comma list; default: all of
#                the collective, see below)
#   --min        report the fastest of the N runs instead of the median: on
#                more ranks than cores the scheduler settles each run into a
#                fast or a slow pattern (up to 2x apart), and the minimum
#                compares the algorithms in the same (fast) pattern
#   -R N         median (or --min) of N runs; each repetition runs every algorithm on a
#                size range before the next repetition starts (default 1)
#   -o FILE      also write the report (markdown) to FILE
#   -B DIR       build directory with benchmarks/*_perf (default: build/)
#   -t SEC       deadline of one benchmark run (default 600 local, 900 netns)
#   --check-all  check results at every size (default: only below 8 MiB, as
#                the check of a large size costs more than its timing)
#   --calibrate  run every job with COLL_TUNE_CALIBRATE=1 (the tuner measures
#                its links at init); on by default with --netns and a RATE:
#                the topology sees a veth's nominal speed, not the shaping
#   --netns KxM  K emulated nodes x M ranks (tests/integration/netns.sh), node
#                links shaped to RATE (-r, default 1gbit; "" = unshaped). Root.
#   --8rank-small  allreduce 8 B on 8 local ranks, forced ring vs the tuner,
#                median of 5
#   --smoke      CI check: 2 ranks, 2 sizes, -n 2, all collectives (seconds)
#
# hier (and for allreduce hier_tree, hier_rhd, hier_direct: hier with that
# inter-node all-reduce; hier_binomial_* and hier_chain_*: the leader-based
# compositions) is included only with several nodes (--netns K>1). With M <= 2
# ranks per node hier_chain_X builds the same schedule as hier_binomial_X, so
# only the latter runs (and stands for a pick of the former).
# A run that exits non-zero or reports #wrong makes its cells FAIL. The tuner's pick is parsed
# from COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNE lines ("tuner: <coll> <bytes>
# bytes (<count> x 4 B) ... -> <algo>") written to COLL_DEBUG_FILE during the
# tuner's own timing run ("?" when none): the tuner decides (and logs) once
# per element size and size bucket, during the warm-up, so the timed
# iterations are unaffected.
# Exit status: 0, 1 when some cell is FAIL, 2 on usage errors, 77 when
# --netns cannot run here.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
NETNS_SH="$REPO/tests/integration/netns.sh"

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit "${1:-2}"; }
die() { echo "tuner_check.sh: $*" >&2; exit 2; }

NP=4 MINB=8 MAXB=256M FACTOR=4 COLLS="" REPS=1 OUTFILE="" BUILD="$REPO/build" TLIMIT=""
NETNS="" RATE=1gbit CHECK_ALL=0 MODE=full FORCE_ALGOS="" STAT=median CALIBRATE=""
while [ $# -gt 0 ]; do
  case "$1" in
    -np) NP=${2:?}; shift ;;
    -b) MINB=${2:?}; shift ;;
    -e) MAXB=${2:?}; shift ;;
    -f) FACTOR=${2:?}; shift ;;
    -c) COLLS=${2:?}; shift ;;
    -R) REPS=${2:?}; shift ;;
    -a) FORCE_ALGOS=${2:?}; shift ;;
    -o) OUTFILE=${2:?}; shift ;;
    -B) BUILD=${2:?}; shift ;;
    -t) TLIMIT=${2:?}; shift ;;
    -r) RATE=${2?}; shift ;;
    --netns) NETNS=${2:?}; shift ;;
    --check-all) CHECK_ALL=1 ;;
    --min) STAT=min ;;
    --calibrate) CALIBRATE=1 ;;
    --8rank-small) MODE=small8 ;;
    --smoke) MODE=smoke ;;
    -h | --help) usage 0 ;;
    *) echo "tuner_check.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done

# bytes: 8, 4K, 16M, 1G -> integer bytes
bytes() {
  local v=${1%[bB]} mul=1
  case "$v" in
    *[kK]) mul=1024; v=${v%?} ;; *[mM]) mul=$((1 << 20)); v=${v%?} ;; *[gG]) mul=$((1 << 30)); v=${v%?} ;;
  esac
  [[ "$v" =~ ^[0-9]+$ ]] || die "bad size '$1'"
  echo $((v * mul))
}

# Iterations per size class: -n/-w more for small sizes so that each run stays
# short; checks only below 8 MiB (unless --check-all). Aimed at: 4 local
# ranks, all five collectives < 10 min; --netns 4x2 allreduce at 1gbit
# (ITERS set below) < 15 min.
ITERS=("-n 200 -w 20 -c 1" "-n 20 -w 2 -c 1" "-n 5 -w 1 -c 0" "-n 2 -w 1 -c 0")
sizeclass() { # bytes -> index into ITERS
  if [ "$MODE" = smoke ]; then echo 0; elif [ "$1" -lt $((128 << 10)) ]; then echo 0; elif [ "$1" -lt $((8 << 20)) ]; then echo 1
  elif [ "$1" -lt $((64 << 20)) ]; then echo 2; else echo 3; fi
}
case "$MODE" in
  smoke) NP=2 MINB=8 MAXB=1M FACTOR=131072 REPS=1 NETNS="" COLLS="" ITERS=("-n 2 -w 1 -c 1")
         TLIMIT=${TLIMIT:-60} ;;
  small8) NP=8 MINB=8 MAXB=8 FACTOR=4 REPS=5 NETNS="" COLLS=allreduce FORCE_ALGOS=ring ;;
esac
[[ "$NP" =~ ^[0-9]+$ && "$NP" -ge 2 ]] || die "-np $NP: need >= 2"
[[ "$REPS" =~ ^[0-9]+$ && "$REPS" -ge 1 ]] || die "-R $REPS: need >= 1"
[[ "$FACTOR" =~ ^[0-9]+$ && "$FACTOR" -ge 2 ]] || die "-f $FACTOR: need >= 2"
MINB=$(bytes "$MINB") MAXB=$(bytes "$MAXB")
if [ "$MINB" -lt 1 ] || [ "$MINB" -gt "$MAXB" ]; then die "need 1 <= -b <= -e"; fi

NODES=1 NRANKS=$NP
if [ -n "$NETNS" ]; then
  [[ "$NETNS" =~ ^([0-9]+)x([0-9]+)$ ]] || die "--netns $NETNS: expected KxM"
  NODES=${BASH_REMATCH[1]} NRANKS=$((BASH_REMATCH[1] * BASH_REMATCH[2]))
  [ "$NRANKS" -ge 2 ] || die "--netns $NETNS: need >= 2 ranks"
  COLLS=${COLLS:-allreduce}
  # 8 ranks on few cores and shaped links are ~10x slower than local: fewer
  # iterations; a call of >= 64 MiB takes seconds, so no warm-up is needed
  ITERS=("-n 20 -w 2 -c 1" "-n 5 -w 1 -c 1" "-n 2 -w 1 -c 0" "-n 1 -w 0 -c 0")
  TLIMIT=${TLIMIT:-900}
  [ -n "$RATE" ] && CALIBRATE=${CALIBRATE:-1}
  if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "tuner_check.sh: SKIPPED: --netns needs root and 'ip netns'" >&2
    exit 77
  fi
fi
COLLS=${COLLS:-allreduce,allgather,reducescatter,broadcast,reduce}
TLIMIT=${TLIMIT:-600}

# The algorithms of each collective (or -a); hier only when the job spans nodes.
algos_of() {
  local hier=""
  [ "$NODES" -gt 1 ] && hier=" hier"
  if [ -n "$FORCE_ALGOS" ]; then echo "${FORCE_ALGOS//,/ }"; return; fi
  case "$1" in
    allreduce)
      local leader="" intra inter
      if [ -n "$hier" ]; then
        for intra in chain binomial; do
          [ "$intra" = chain ] && [ $((NRANKS / NODES)) -le 2 ] && continue
          for inter in ring tree rhd direct; do leader+=" hier_${intra}_$inter"; done
        done
      fi
      echo "ring tree rhd direct$hier${hier:+ hier_tree hier_rhd hier_direct}$leader" ;;
    allgather) echo "ring bruck direct$hier" ;;
    reducescatter) echo "ring rhd direct$hier" ;;
    broadcast | reduce) echo "chain binomial" ;;
    *) die "unknown collective '$1'" ;;
  esac
}
IFS=',' read -r -a COLL_LIST <<<"$COLLS"
for c in "${COLL_LIST[@]}"; do
  algos_of "$c" >/dev/null
  [ -x "$BUILD/benchmarks/${c}_perf" ] || die "$BUILD/benchmarks/${c}_perf not found (-B BUILD_DIR)"
done

# Sizes, cut into bands: consecutive sizes of one class, one benchmark run
# each. A band is a progression (-b first -e last -f FACTOR) or, for -e when
# it is off the progression, two sizes (-f 1 -i step), else a band of its own.
BANDS=() # "class size size..."
add_size() {
  local cl prev
  cl=$(sizeclass "$1")
  local n=${#BANDS[@]}
  if [ "$n" -gt 0 ]; then
    local -a b
    read -r -a b <<<"${BANDS[n - 1]}"
    prev=${b[${#b[@]} - 1]}
    if [ "${b[0]}" = "$cl" ] && { [ $((prev * FACTOR)) = "$1" ] || [ ${#b[@]} = 2 ]; }; then
      BANDS[n - 1]+=" $1"
      return
    fi
  fi
  BANDS+=("$cl $1")
}
s=$MINB
while :; do
  add_size "$s"
  [ $((s * FACTOR)) -le "$MAXB" ] || break
  s=$((s * FACTOR))
done
if [ "$s" -lt "$MAXB" ]; then add_size "$MAXB"; fi
# band -> the benchmark's size flags
size_flags() {
  local -a b
  read -r -a b <<<"${BANDS[$1]}"
  local first=${b[1]} last=${b[${#b[@]} - 1]}
  if [ ${#b[@]} = 3 ] && [ $((first * FACTOR)) != "$last" ]; then
    echo "-b $first -e $last -f 1 -i $((last - first))"
  else
    echo "-b $first -e $last -f $FACTOR"
  fi
}

WORK=$(mktemp -d /tmp/tuner_check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'echo "tuner_check.sh: interrupted" >&2; exit 130' INT
trap 'echo "tuner_check.sh: terminated (SIGTERM)" >&2; exit 143' TERM
: >"$WORK/runs.tsv"

# run COLL ALGO BAND REP: one benchmark run (ALGO "tuner" = no COLL_ALGO);
# rank 0's output -> $WORK/<id>.res, its status -> runs.tsv.
run() {
  local coll=$1 algo=$2 band=$3 rep=$4 t0=$SECONDS rc=0
  local -a sizes iters envs=(COLL_TIMEOUT="$TLIMIT" COLL_TUNE_CALIBRATE="${CALIBRATE:-0}")
  read -r -a sizes <<<"$(size_flags "$band")"
  local id="$coll.$algo.$band.$rep"
  read -r -a iters <<<"${ITERS[${BANDS[band]%% *}]}"
  [ "$CHECK_ALL" = 1 ] && iters+=(-c 1)
  if [ "$algo" = tuner ]; then
    mkdir -p "$WORK/$id.dbg"
    envs+=(COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNE COLL_DEBUG_FILE="$WORK/$id.dbg/%h.%p")
  else
    envs+=(COLL_ALGO="$coll:$algo")
  fi
  local -a bench=("$BUILD/benchmarks/${coll}_perf" "${sizes[@]}" "${iters[@]}" -d float)
  if [ -n "$NETNS" ]; then
    # launcher mode: netns.sh starts one process per rank (RANK/WORLD_SIZE)
    timeout -k 30 $((TLIMIT + 60)) env -u COLL_ALGO "${envs[@]}" \
      "$NETNS_SH" -k "$NODES" -m "$((NRANKS / NODES))" ${RATE:+-r "$RATE"} -t "$TLIMIT" -- "${bench[@]}" \
      >"$WORK/$id.log" 2>&1 || rc=$?
    sed -n 's/^\[0\] //p' "$WORK/$id.log" >"$WORK/$id.res"
  else
    # forked local ranks, TCP on loopback only
    timeout -k 10 "$TLIMIT" env -u COLL_ALGO "${envs[@]}" COLL_SOCKET_IFNAME==lo \
      COLL_TESTS_LAUNCH_TIMEOUT="$TLIMIT" "${bench[@]}" -np "$NP" >"$WORK/$id.log" 2>&1 || rc=$?
    cp "$WORK/$id.log" "$WORK/$id.res"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$coll" "$algo" "$band" "$rep" "$rc" >>"$WORK/runs.tsv"
  echo "# $coll $algo ${sizes[*]}, run $((rep + 1))/$REPS: status $rc, $((SECONDS - t0)) s" >&2
  if [ "$rc" != 0 ]; then
    grep -E 'error|fail|no algorithm|terminated|interrupted|timeout after|killing|exited with' "$WORK/$id.log" |
      sort -u | head -n 5 | sed 's/^/#   /' >&2 || true
  fi
}

START=$SECONDS rc=0
STARTED="$(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
REV=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')
for coll in "${COLL_LIST[@]}"; do
  read -r -a names <<<"$(algos_of "$coll") tuner"
  for ((band = 0; band < ${#BANDS[@]}; band++)); do
    for ((rep = 0; rep < REPS; rep++)); do
      # interleaved: every algorithm once per repetition, rotating the order
      for ((i = 0; i < ${#names[@]}; i++)); do
        run "$coll" "${names[(i + rep) % ${#names[@]}]}" "$band" "$rep"
      done
    done
  done
done
printf '%s\n' "${BANDS[@]}" >"$WORK/bands.txt"

{
  if [ -n "$NETNS" ]; then where="--netns $NETNS ($NRANKS ranks on $NODES nodes), links ${RATE:-unshaped}"
  else where="$NP local ranks (-np $NP), 1 node"; fi
  echo "# tuner_check: $where, $STAT of $REPS, $(( (SECONDS - START) / 60 )) min${CALIBRATE:+, every job with COLL_TUNE_CALIBRATE=1}"
  echo "# $(nproc) CPU(s); started $STARTED; ended with load average $(cut -d' ' -f1-3 /proc/loadavg); source tree $REV"
  echo "# time = out-of-place time (us) of the *_perf benchmark, float; iterations per size range:"
  for ((band = 0; band < ${#BANDS[@]}; band++)); do echo "#   $(size_flags "$band") ${ITERS[${BANDS[band]%% *}]}"; done
  STAT=$STAT FORCED=$([ "$MODE" = small8 ] && echo ring) python3 - "$WORK" "$NRANKS" "$COLLS" <<'PY'
import math, os, re, statistics, sys
work, nranks, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
bands = []  # band -> list of requested sizes
for line in open(os.path.join(work, "bands.txt")):
    bands.append([int(x) for x in line.split()[1:]])
runs = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "runs.tsv"))]
STAT = min if os.environ.get("STAT") == "min" else statistics.median
TUNE = re.compile(r"tuner:\s*([\w-]+)\s+(\d+)\s+bytes\s+(?:\(\d+ x (\d+) B\))?.*?->\s*(\w+)")
fails, coarse = 0, False
allratios = []

def summary(ratios, what):
    """ratios: (tuner/best, pick/best or None, size)"""
    picks = [(p, sz) for _, p, sz in ratios if p is not None]
    w = max((r, sz) for r, _, sz in ratios)
    out = ""
    if picks:  # the forced run of the pick exists (not with -a leaving it out)
        wp = max(picks)
        out = "pick/best within 15%% at %d of %d %s (%d: the fastest), worst %.2f at %d B; " % (
            sum(p <= 1.15 for p, _ in picks), len(picks), what, sum(p <= 1.0 for p, _ in picks), wp[0], wp[1])
    return out + "tuner/best within 15%% at %d of %d, worst %.2f at %d B" % (
        sum(r <= 1.15 for r, _, _ in ratios), len(ratios), w[0], w[1])

def fmt(t):
    return "FAIL" if t is None else ("%.0f" % t if t >= 1000 else "%.1f" % t)

for coll in colls:
    algos = []
    for c, a, *_ in runs:
        if c == coll and a not in algos and a != "tuner":
            algos.append(a)
    times, bad, actual = {}, set(), {}  # (algo, size) -> [us]; failed cells; size -> bytes printed
    for c, a, band, rep, rc in runs:
        if c != coll:
            continue
        sizes = bands[int(band)]
        rows = []
        for line in open(os.path.join(work, "%s.%s.%s.%s.res" % (c, a, band, rep)), errors="replace"):
            f = line.split()
            if len(f) >= 13 and f[0].isdigit() and not line.startswith("#"):
                rows.append(f)
        for i, s in enumerate(sizes):
            f = rows[i] if i < len(rows) else None
            if rc != "0" or f is None or (f[8] != "N/A" and float(f[8]) > 0):
                bad.add((a, s))
                continue
            actual[s] = int(f[0])
            times.setdefault((a, s), []).append(float(f[5]))
            coarse |= "e" in f[5]
    # the tuner's pick: last "tuner:" line per power-of-two bucket of the
    # bytes of one call (rank 0 also logs a ladder at init, before the calls)
    picks = {}
    for d in sorted(x for x in os.listdir(work) if x.startswith(coll + ".tuner.") and x.endswith(".dbg")):
        for fn in sorted(os.listdir(os.path.join(work, d))):
            mine = {}
            for line in open(os.path.join(work, d, fn), errors="replace"):
                m = TUNE.search(line)
                # the benchmarks run floats (4 B); other element sizes have their own decisions
                if (m and m.group(1).replace("-", "").replace("_", "").lower() == coll and int(m.group(2)) > 0
                        and m.group(3) in (None, "4")):
                    mine[int(m.group(2)).bit_length()] = m.group(4)
            for k, v in mine.items():
                picks.setdefault(k, v)
    cols = algos + ["tuner"]
    print("\n## %s, %d ranks\n" % (coll, nranks))
    print("| size (B) | " + " | ".join(cols) + " | tuner pick | best | pick/best | tuner/best |")
    print("|---:|" + "---:|" * len(cols) + ":---|:---|---:|---:|")
    ratios, zero = [], False
    allsizes = [s for b in bands for s in b]
    for s in allsizes:
        cell = {}
        for a in cols:
            cell[a] = None if (a, s) in bad or (a, s) not in times else STAT(times[(a, s)])
            fails += cell[a] is None
        ok = [a for a in algos if cell[a] is not None]
        best = min(ok, key=lambda a: cell[a]) if ok else None
        act = actual.get(s)
        per_call = None if act is None else (act // nranks if coll in ("allgather", "reducescatter") else act)
        pick = "-" if per_call == 0 else picks.get(per_call.bit_length() if per_call else -1, "?")
        label = str(s)
        # the mailbox is what forced "direct" runs too at these sizes
        forced = "direct" if pick == "mailbox" else pick
        if forced not in cols:  # M <= 2: hier_chain_X is hier_binomial_X
            forced = forced.replace("hier_chain_", "hier_binomial_")
        if act == 0:  # fewer elements than ranks: nothing moves; not compared
            label, zero, ratio, pratio = "%d*" % s, True, "-", "-"
        elif best is None or cell["tuner"] is None or cell[best] <= 0:
            ratio, pratio = "-", "-"
        else:
            r = cell["tuner"] / cell[best]
            ratio = "%.2f%s" % (r, " !" if r > 1.15 else "")
            pr = cell[forced] / cell[best] if cell.get(forced) is not None else None
            pratio = "-" if pr is None else "%.2f%s" % (pr, " !" if pr > 1.15 else "")
            ratios.append((r, pr, s))
        print("| %s | %s | %s | %s | %s | %s |" % (label, " | ".join(fmt(cell[a]) for a in cols), pick, best or "-",
                                               pratio, ratio))
    if zero:
        print("\n\\* the per-rank count is 0 on %d ranks: nothing is sent; not compared" % nranks)
    if ratios:
        print("\n**%s summary: %s**" % (coll, summary(ratios, "sizes")))
        allratios += ratios
    else:
        print("\n**%s summary: no size with both a forced and a tuner time**" % coll)
if len(colls) > 1 and allratios:
    print("\n**all: %s**" % summary(allratios, "(collective, size) pairs"))
if os.environ.get("FORCED") and allratios:
    r = allratios[0][0]
    f = os.environ["FORCED"]
    print("\n**%s 8 B on %d ranks: tuner/%s = %.2f (%s)**; runs (us): %s %s, tuner %s" % (
          colls[0], nranks, f, r, "tuner faster" if r < 1 else "tuner NOT faster", f,
          times.get((f, allsizes[0])), times.get(("tuner", allsizes[0]))))
if coarse:
    print("\n(times of 10 s and more come from the benchmark with 2 significant digits)")
print("\n(pick/best = forced time of the algorithm the tuner picked (mailbox: direct) / the fastest forced time: "
      "the quality of the choice, measured under the same conditions as the others; tuner/best = the tuner's own run / "
      "the fastest forced time; ! = more than 15% slower; FAIL = the run exited non-zero or reported #wrong)")
sys.exit(1 if fails else 0)
PY
} | tee "$WORK/report.md" || rc=$? # the status of python3: 1 when a cell is FAIL
[ -z "$OUTFILE" ] || cp "$WORK/report.md" "$OUTFILE"
exit "$rc"
