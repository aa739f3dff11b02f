#!/usr/bin/env bash
# elastic_mpirun.sh — ringtrain training under mpirun (no Slurm) that loses a host and keeps training: the same
# rules as slurm/train.sbatch's elastic restarts (docs/faults.md), on the hosts of a host file.
#
#   scripts/elastic_mpirun.sh HOSTFILE RANKS_PER_HOST RINGTRAIN train JOB_FILE --set run.dir=DIR [--set ...]
#
# HOSTFILE: one host a line (a "slots=" or anything after the name is ignored; # comments allowed). Ranks are
# placed RANKS_PER_HOST a host, in the file's order (rank r on host r / RANKS_PER_HOST). run.dir must be given
# with --set run.dir=DIR (or --set=run.dir=DIR): the script looks for the run's checkpoints there.
#
# When a launch ends with an exit other than 0, 75 (preemption: passed on, resume by hand or by your scheduler) and the
# input errors 2, 3, 4, 5 (they would recur), nor a run that diverged (exit 6 with ringtrain's "non-finite training
# loss", "parameters" or "state": it would diverge again), the failed host is rank R's: the rank mpirun names ("process rank R
# ... exited on signal", a broken pipe aside), or the rank ringtrain's watchdog names for a stall (before mpirun's
# MPI_Abort line, which names the healthy rank whose watchdog ended the job), or a rank that called MPI_Abort ("MPI_ABORT
# was invoked on rank R") or ended with an exit code other than ringtrain's agreed 6 ("Process name: [[J,1],R]"), or
# the odd one out of a parameter comparison; or else a host that no longer answers the probe. A failure that names no host ends the run with its code. The hosts left that answer get the run again with
# --resume (plus --failed-node and --seconds-lost, which ringtrain writes into metrics.jsonl's "membership" record), up
# to ELASTIC_MAX_RESTARTS times and down to ELASTIC_MIN_NODES hosts. Each restart is a line "elastic_mpirun: elastic
# restart N/MAX: ..."; when they are spent the script exits with the failed launch's code after printing the history.
#
# Environment:
#   ELASTIC_MAX_RESTARTS  restarts on fewer hosts (default 3; 0: off; these bounds must be whole numbers: exit 2)
#   ELASTIC_MIN_NODES     fewest hosts worth continuing on (default 1)
#   ELASTIC_MPIRUN        the mpirun command and its options, word-split (default "mpirun"); the script adds -np,
#                         --hostfile and --map-by
#   ELASTIC_PROBE         a command that runs `true` on a host: "$ELASTIC_PROBE HOST true" (default
#                         "ssh -o BatchMode=yes -o ConnectTimeout=5"); the tests give their netns launcher
#   ELASTIC_PROBE_S       seconds a host gets to answer (default 10)
set -euo pipefail

usage() {
  echo "usage: scripts/elastic_mpirun.sh HOSTFILE RANKS_PER_HOST RINGTRAIN train JOB_FILE --set run.dir=DIR [...]" >&2
  exit 2
}
[ $# -ge 5 ] || usage
hostfile=$1 per_host=$2
shift 2
[ -r "$hostfile" ] || { echo "elastic_mpirun: host file '$hostfile' cannot be read; give a readable file of host names" >&2; exit 2; }
[[ "$per_host" =~ ^[1-9][0-9]*$ ]] || { echo "elastic_mpirun: RANKS_PER_HOST '$per_host' must be a positive integer" >&2; exit 2; }
command=("$@")
run_dir=""
for arg in "${command[@]}"; do
  case "$arg" in
    run.dir=*) run_dir=${arg#run.dir=} ;;
    --set=run.dir=*) run_dir=${arg#--set=run.dir=} ;;
  esac
done
[ -n "$run_dir" ] || { echo "elastic_mpirun: give the run's folder with --set run.dir=DIR (its checkpoints are resumed from)" >&2; exit 2; }
run_dir=${run_dir%\"}
run_dir=${run_dir#\"}

read -r -a mpirun <<<"${ELASTIC_MPIRUN:-mpirun}"
read -r -a probe <<<"${ELASTIC_PROBE:-ssh -o BatchMode=yes -o ConnectTimeout=5}"
max_restarts=${ELASTIC_MAX_RESTARTS:-3} min_nodes=${ELASTIC_MIN_NODES:-1}
# A bound that is not a number would make its test always false and the loop it bounds endless.
for knob in ELASTIC_MAX_RESTARTS ELASTIC_MIN_NODES ELASTIC_PROBE_S; do
  if [ -n "${!knob:-}" ] && ! [[ "${!knob}" =~ ^[0-9]+$ ]]; then
    echo "elastic_mpirun: $knob='${!knob}' is not a whole number; set it to one (0 turns restarts off)" >&2
    exit 2
  fi
done
mapfile -t hosts < <(sed -e 's/#.*//' "$hostfile" | awk 'NF { print $1 }')
[ ${#hosts[@]} -gt 0 ] || { echo "elastic_mpirun: host file '$hostfile' names no host" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/elastic_mpirun.XXXXXX")
trap 'rm -rf "$work"' EXIT

# launch EXTRA...: the run on "${hosts[@]}"; sets rc; mpirun's messages go to stderr and to $work/err.
launch() {
  local h
  for h in "${hosts[@]}"; do echo "$h slots=$per_host"; done >"$work/hosts"
  set +e
  # stdout straight through (fd 3), stderr through tee; the pipeline ends when tee has written everything.
  { "${mpirun[@]}" -np $((${#hosts[@]} * per_host)) --hostfile "$work/hosts" --map-by slot "${command[@]}" "$@" \
      2>&1 1>&3 3>&- | tee "$work/err" >&2 3>&-
    rc=${PIPESTATUS[0]}; } 3>&1
  set -e
}
answers() { timeout -k 5 "${ELASTIC_PROBE_S:-10}" "${probe[@]}" "$1" true >/dev/null 2>&1; }
# failed_alike: every rank printed ringtrain's own exit line with one and the same code (a wrong NCCL interface, a
# bug, a library refusing the job everywhere): a failure of the job, which fewer hosts would meet again. Exit 6 alike
# is ringtrain's agreed fault (a stalled rank, parameters that differ), whose message names the rank to drop.
failed_alike() {
  local lines ranks codes
  lines=$(grep -oE '^ringtrain: .*\(exit [0-9]+\) \[rank [0-9]+/[0-9]+' "$work/err" || true)
  ranks=$(grep -oE '\[rank [0-9]+' <<<"$lines" | sort -u | grep -c . || true)
  codes=$(grep -oE '\(exit [0-9]+\)' <<<"$lines" | sort -u || true)
  [ "$ranks" = $((${#hosts[@]} * per_host)) ] && [ "$(grep -c . <<<"$codes")" = 1 ] && [ "$codes" != "(exit 6)" ]
}
# The rank mpirun names as the first to end by a signal other than SIGPIPE ("process rank R ... exited on signal"); else
# the rank ringtrain's watchdog blames for a stall ("rank R has not arrived"; rank 0 where another rank had to end the
# job for it), which its own MPI_Abort would otherwise hide; else the rank mpirun names as ending the job by MPI_Abort
# ("MPI_ABORT was invoked on rank R") or with a code other than ringtrain's agreed 6 (its "Process name: [[J,1],R]" and
# "Exit code: N" lines); else the odd one out of a parameter comparison (listed last).
failed_rank() {
  local rank code
  # Not a broken pipe (signal 13): a rank writing to a killed peer's connection dies of SIGPIPE, and mpirun may name it.
  rank=$(grep -E 'process rank [0-9]+ .*exited (on signal|with)' "$work/err" | grep -vE 'on signal 13[^0-9]' | head -1 |
    grep -oE 'process rank [0-9]+' | grep -oE '[0-9]+' || true)
  # A stall: the watchdog that ends the job calls MPI_Abort itself, on a healthy rank.
  [ -z "$rank" ] && rank=$(stalled_rank "$work/err")
  # A rank that ended the job alone (ringtrain's lone-rank errors call MPI_Abort; exit 2-5 never reach here).
  [ -z "$rank" ] && rank=$(grep -oE 'MPI_ABORT was invoked on rank [0-9]+' "$work/err" | head -1 | grep -oE '[0-9]+$' || true)
  if [ -z "$rank" ]; then
    code=$(grep -oE '^ *Exit code: *[0-9]+' "$work/err" | head -1 | grep -oE '[0-9]+' || true)
    [ -n "$code" ] && [ "$code" != 6 ] &&
      rank=$(grep -oE 'Process name: \[\[[0-9]+,[0-9]+\],[0-9]+\]' "$work/err" | head -1 | grep -oE '[0-9]+\]$' | tr -d ']' || true)
  fi
  # A lone rank listed last after a larger group: groups of equal size blame no one.
  [ -z "$rank" ] &&
    rank=$(grep -oE ': ranks [0-9, ]+ hold [0-9a-f]+(; ranks? [0-9, ]+ holds? [0-9a-f]+)*; rank [0-9]+ holds' "$work/err" |
      head -1 | grep -oE 'rank [0-9]+ holds$' | grep -oE '[0-9]+' || true)
  echo "$rank"
}
# stalled_rank FILE: the first rank ringtrain's watchdog names as not arrived, or 0 where a rank other than 0 had to
# end the job because rank 0 (which names the missing ranks) did not; "" for neither.
stalled_rank() {
  local rank
  rank=$(grep -oE 'ranks? [0-9, ]+ ha(s|ve) not arrived' "$1" | head -1 | grep -oE '[0-9]+' | head -1 || true)
  [ -z "$rank" ] && grep -q 'rank 0, which names the missing ranks, did not end the job' "$1" && rank=0
  echo "$rank"
}
# The host that failed: failed_rank's host, else the first that does not answer; "" when neither.
failed_host() {
  local rank h
  rank=$(failed_rank)
  if [ -n "$rank" ] && [ $((rank / per_host)) -lt ${#hosts[@]} ]; then echo "${hosts[$((rank / per_host))]}"; return; fi
  for h in "${hosts[@]}"; do answers "$h" || { echo "$h"; return; }; done
  echo ""
}

history=()
restarts=0
launch
while :; do
  case "$rc" in 0|2|3|4|5|75) break ;; esac
  # A run every rank agreed diverged (exit 6, "non-finite training loss", "parameters" or "state") would diverge again
  # on fewer hosts.
  if grep -qE "non-finite training (loss at epoch|parameters|state)" "$work/err"; then
    echo "elastic_mpirun: not restarting: the training diverged (exit $rc), which fewer hosts would repeat; lower" \
         "optimizer.base_lr or lengthen optimizer.warmup_epochs, then run again with --resume" >&2
    exit "$rc"
  fi
  if failed_alike; then
    echo "elastic_mpirun: not restarting: every rank ended alike (exit $rc), a failure of the job rather than of a" \
         "host; see the ranks' messages above" >&2
    exit "$rc"
  fi
  ended=$(date +%s)
  lost=$(failed_host)
  if [ -z "$lost" ]; then
    echo "elastic_mpirun: not restarting (exit $rc): mpirun names no failed rank and every host answers, so no host" \
         "was lost; mpirun's own error is above" >&2
    exit "$rc"
  fi
  left=()
  for h in "${hosts[@]}"; do [ "$h" != "$lost" ] && answers "$h" && left+=("$h"); done
  history+=("launch on [${hosts[*]}] ended with exit $rc at $(date -u -d "@$ended" +%H:%M:%S); failed host ${lost:-unknown}; answering: [${left[*]}]")
  if [ "$restarts" -ge "$max_restarts" ] || [ ${#left[@]} -lt "$min_nodes" ] || [ ${#left[@]} = 0 ]; then
    why="${#left[@]} host(s) left, ELASTIC_MIN_NODES=$min_nodes"
    [ "$restarts" -ge "$max_restarts" ] && why="ELASTIC_MAX_RESTARTS=$max_restarts restart(s) spent"
    echo "elastic_mpirun: not restarting ($why); the history of this run's launches:" >&2
    for line in "${history[@]}"; do echo "elastic_mpirun:   $line" >&2; done
    exit "$rc"
  fi
  restarts=$((restarts + 1))
  # The folder quoted, so brackets or stars in its name are taken as they are; step numbers sort as numbers; only
  # the names ringtrain writes count (9 digits, or more without a leading zero), as ringtrain counts them.
  shopt -s nullglob
  checkpoints=()
  for f in "$run_dir"/checkpoints/ckpt-s*.h5; do
    [[ "${f##*/}" =~ ^ckpt-s([0-9]+)\.h5$ ]] || continue
    digits=${BASH_REMATCH[1]}
    { [ ${#digits} = 9 ] || { [ ${#digits} -gt 9 ] && [[ $digits != 0* ]]; }; } && checkpoints+=("$f")
  done
  shopt -u nullglob
  newest=$( ((${#checkpoints[@]})) && printf '%s\n' "${checkpoints[@]}" | sort -V | tail -1 || true)
  if [ -n "$newest" ]; then
    lost_s=$(($(date +%s) - $(stat -c %Y "$newest")))
    again=(--resume --failed-node "${lost:-unknown}" --seconds-lost "$((lost_s > 0 ? lost_s : 0))")
    from="from $(basename "$newest")"
  else
    again=(--set run.overwrite=true --failed-node "${lost:-unknown}")
    from="from the start (no checkpoint yet)"
  fi
  echo "elastic_mpirun: elastic restart $restarts/$max_restarts: host ${lost:-unknown} failed (exit $rc);" \
       "continuing on ${#left[@]} host(s) [${left[*]}] x $per_host rank(s) $from, $(($(date +%s) - ended)) s after the failure"
  history+=("restart $restarts: on [${left[*]}] $from")
  hosts=("${left[@]}")
  launch "${again[@]}"
done
exit "$rc"
