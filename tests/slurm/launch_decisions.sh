#!/usr/bin/env bash
# The decisions of the launch scripts, slurm/train.sbatch and scripts/elastic_mpirun.sh, without Slurm, MPI or a
# ringtrain build: stub srun, scontrol, sbatch, mpirun, ssh, probe and ringtrain executables (first in PATH, in a
# scratch folder) replay scripted launcher output and exit codes and log the argv they were given. Proves, from
# that argv and the scripts' exit codes and messages:
#   train.sbatch
#     1  a run.dir given as --set=run.dir=DIR, or a job name, holding brackets: its checkpoint is found, so a
#        requeue resumes and an elastic restart after a lost node uses --resume, never run.overwrite
#     2  a requeue before the first checkpoint starts over (run.overwrite) instead of being refused by ringtrain; a
#        file only named like a checkpoint (an extra leading zero) is none
#     3  a first launch into a named run dir holding a run gets no --resume (ringtrain refuses it); the user's own
#        --resume is passed once
#     4  every rank exits 6: the node dropped is that of the rank ringtrain blames (the odd one out of a parameter
#        comparison, the rank that has not arrived), not the first node srun names
#     5  every node's tasks exiting 7 alike is the job's failure: no restart, exit 7
#     6  srun failing to start the ranks (no task line, every probe answers): no restart, exit 1, "no node was lost"
#     7  ELASTIC_MAX_RESTARTS / RT_MAX_REQUEUES that are not numbers, and tasks that do not divide over the nodes:
#        exit 2 naming the cause, nothing launched
#     8  a checkpoint stamped in the future (clock skew): --seconds-lost 0, not negative
#     9  a lost node (srun names it): one restart on the node left, --resume --failed-node n2
#     probe      srun names no task and a node's probe hangs: that node is dropped after ELASTIC_PROBE_S
#     requeue    exit 75 requeues through scontrol; past RT_MAX_REQUEUES it ends with 75
#     staging    RT_STAGE_DATA: the ranks read their node's copy (a linked split copied as its files), which is
#                removed at the end; split folders without shards are refused with exit 4
#   elastic_mpirun.sh
#     10 Open MPI's "Process name: [[J,1],R]" / "Exit code: 7": rank R's host dropped, restart with --resume
#        (--seconds-lost 0 from a checkpoint stamped in the future, as in 8)
#     11 mpirun names nothing and every host answers: no restart, the launch's code
#     12 --set=run.dir=DIR (brackets in DIR) is recognised and its checkpoint resumed from
#     13 every rank printing ringtrain's same exit 7 (Open MPI naming one of them): no restart, no host dropped
# Each case prints "ok   ..." or "FAIL ..."; the exit is 1 if any failed, 77 where bash < 4.4 (the scripts need it).
# Usage: launch_decisions.sh SOURCE_DIR
set -uo pipefail
if [ $# -ne 1 ] || [ ! -f "$1/slurm/train.sbatch" ]; then
  echo "usage: launch_decisions.sh SOURCE_DIR" >&2
  exit 2
fi
# The scripts run under the bash in PATH, so that is the one whose version matters: before 4.4 an empty array
# under set -u aborts them, which says nothing about their decisions.
if [ "$(bash -c 'echo $((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1]))')" -lt 404 ]; then
  echo "skip: bash >= 4.4 is missing (found $(bash -c 'echo $BASH_VERSION'))"
  exit 77
fi
src=$(cd "$1" && pwd)
sbatch_script=$src/slurm/train.sbatch
mpirun_script=$src/scripts/elastic_mpirun.sh
# A CI job that itself runs inside Slurm, or a developer's shell, must not steer the scripts under test.
unset "${!SLURM_@}" "${!SRUN_@}" "${!RT_@}" "${!ELASTIC_@}"

# Checked: with no folder the stubs below would be written to /bin.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/launch-decisions.XXXXXX" 2>/dev/null || mktemp -d /tmp/launch-decisions.XXXXXX) ||
  { echo "FAIL cannot create a scratch folder"; exit 1; }
trap 'rm -rf "$scratch"' EXIT
stubs=$scratch/bin
mkdir -p "$stubs"
t0=$SECONDS

# ---------------------------------------------------------------------------------------------------- stubs
# A case's folder ($STUB_DIR) scripts launch N in launch.N: first line "RC [norun]", then the launcher's stderr;
# ckpt.N names a checkpoint file the launch writes (progress); dead lists probe targets that fail ("NODE") or
# hang ("NODE hang"). Every stub appends what it was asked to $STUB_DIR/log, each argument in [] so that spaces and
# brackets stay visible.
# What the launcher stubs share, sourced by each: a probe's answer, and a scripted training launch.
cat >"$stubs/stub_lib.sh" <<'EOF'
d=${STUB_DIR:?}
# answer_probe TARGET [COMMAND...]: exits as the case's dead list says for TARGET (fail, hang, or answer).
answer_probe() {
  echo "probe $*" >>"$d/log"
  if [ -f "$d/dead" ]; then
    grep -qxF "$1 hang" "$d/dead" && exec sleep 30   # exec: the probe's timeout ends the sleep itself
    grep -qxF "$1" "$d/dead" && exit 1
  fi
  exit 0
}
# scripted_launch WHAT NODE CMD...: launch N as launch.N scripts it (exit code, stderr, a checkpoint written,
# norun: the command never starts); WHAT is the log line after the launcher's name and N.
scripted_launch() {
  local what=$1 node=$2 n rc=0 flag="" p
  shift 2
  n=$(($(cat "$d/count" 2>/dev/null || echo 0) + 1))
  echo "$n" >"$d/count"
  echo "${0##*/} $n$what" >>"$d/log"
  # A script that relaunches without end would otherwise only stop at the case's timeout; 2 ends both loops.
  if [ "$n" -gt 6 ]; then echo "RUNAWAY: launch $n" >>"$d/log"; exit 2; fi
  [ -f "$d/launch.$n" ] && read -r rc flag <"$d/launch.$n"
  # One task stands for all: the stub ringtrain logs the argv every rank would get.
  [ "$flag" = norun ] || SLURMD_NODENAME=$node "$@"
  if [ -f "$d/ckpt.$n" ]; then p=$(cat "$d/ckpt.$n"); mkdir -p "$(dirname "$p")" && : >"$p"; fi
  [ -f "$d/launch.$n" ] && tail -n +2 "$d/launch.$n" >&2
  exit "$rc"
}
EOF

cat >"$stubs/srun" <<'EOF'
#!/usr/bin/env bash
source "$(dirname "$0")/stub_lib.sh"
nodelist="" mpi="" overlap=0 opts=()
# train.sbatch gives every srun option as one --name=value word; the command starts at the first other word.
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do
  case "$1" in
    --nodelist=*) nodelist=${1#--nodelist=} ;;
    --mpi=*) mpi=${1#--mpi=} ;;
    --overlap) overlap=1 ;;
  esac
  opts+=("$1")
  shift
done
[ "$overlap" = 1 ] && answer_probe "$nodelist"
if [ -z "$mpi" ]; then   # staging or cleanup: once on each node
  echo "srun-other$(printf ' [%s]' "$@")" >>"$d/log"
  if [ -n "$nodelist" ]; then nodes=${nodelist//,/ }; else nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST"); fi
  for node in $nodes; do SLURMD_NODENAME=$node "$@" || exit 1; done
  exit 0
fi
scripted_launch "$(printf ' [%s]' "${opts[@]}")" "${nodelist%%,*}" "$@"
EOF

cat >"$stubs/mpirun" <<'EOF'
#!/usr/bin/env bash
source "$(dirname "$0")/stub_lib.sh"
np="" hostfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --map-by) shift 2 ;;
    *) break ;;
  esac
done
scripted_launch " np=$np hosts=$(awk '{ print $1 }' "$hostfile" | paste -sd,)" "" "$@"
EOF

cat >"$stubs/probe" <<'EOF'
#!/usr/bin/env bash
source "$(dirname "$0")/stub_lib.sh"
answer_probe "$@"
EOF

cat >"$stubs/scontrol" <<'EOF'
#!/usr/bin/env bash
d=${STUB_DIR:?}
case "$1 ${2:-}" in
  "show hostnames")
    # Slurm's compressed form n[1-2] as well as a plain comma list.
    if [[ "$3" =~ ^([^[]*)\[([0-9]+)-([0-9]+)\]$ ]]; then
      for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do echo "${BASH_REMATCH[1]}$i"; done
    else
      tr ',' '\n' <<<"$3"
    fi ;;
  "requeue "*) echo "scontrol requeue $2" >>"$d/log" ;;
  *) echo "UNEXPECTED scontrol $*" >>"$d/log"; exit 1 ;;
esac
EOF

# Neither script may reach these; a call is logged so that the case fails instead of touching a real cluster.
for tool in sbatch ssh; do
  printf '#!/usr/bin/env bash\necho "UNEXPECTED %s $*" >>"${STUB_DIR:?}/log"\nexit 255\n' "$tool" >"$stubs/$tool"
done

cat >"$stubs/ringtrain" <<'EOF'
#!/usr/bin/env bash
echo "ringtrain$(printf ' [%s]' "$@")" >>"${STUB_DIR:?}/log"
for a in "$@"; do
  case "$a" in
    data.train=*) [ -d "${a#data.train=}" ] && echo "staged copy present: ${a#data.train=}" >>"$STUB_DIR/log" ;;
    data.test=*) t=${a#data.test=}
      [ -d "$t" ] && [ ! -L "$t" ] && [ -f "$t/shard-00000-of-00001.h5" ] &&
        echo "staged test is a folder of shards: $t" >>"$STUB_DIR/log" ;;
  esac
done
exit 0
EOF
chmod +x "$stubs"/*

# ---------------------------------------------------------------------------------------------------- harness
failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

new_case() {  # new_case NAME: a fresh folder $d for the case's scripts, log and run dirs
  d=$scratch/$1
  mkdir -p "$d"
  : >"$d/log"
  why=()
}
script() {  # script N RC [norun] <STDERR: what launch N prints and exits with
  local n=$1
  shift
  { echo "$*"; cat; } >"$d/launch.$n"
}
checkpoint() {  # checkpoint DIR [TOUCH_DATE]: a checkpoint (and the run's metrics) in run dir DIR
  mkdir -p "$1/checkpoints"
  : >"$1/metrics.jsonl"
  : >"$1/checkpoints/ckpt-s000000008.h5"
  [ $# -lt 2 ] || touch -d "$2" "$1/checkpoints/ckpt-s000000008.h5"
}

# run_sbatch [VAR=VALUE ...] -- ARGS...: train.sbatch JOB ARGS as a 2-node x 2-task job 4242; sets rc, output in $d/out
run_sbatch() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  (cd "$d" && env PATH="$stubs:$PATH" STUB_DIR="$d" TMPDIR="$d" SLURM_JOB_ID=4242 SLURM_JOB_NAME=rt \
    SLURM_JOB_NUM_NODES=2 SLURM_JOB_NODELIST='n[1-2]' SLURM_NTASKS=4 SLURM_SUBMIT_DIR="$d" SLURM_RESTART_COUNT=0 \
    RT_BIN="$stubs/ringtrain" ELASTIC_PROBE_S=1 "${vars[@]}" timeout 20 bash "$sbatch_script" job.toml "$@") \
    >"$d/out" 2>&1
  rc=$?
}
# run_mpirun [VAR=VALUE ...] -- ARGS...: elastic_mpirun.sh HOSTFILE 2 RINGTRAIN train JOB ARGS, hosts A and B
run_mpirun() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  printf 'A slots=2\n# B is the second host\nB\n' >"$d/hosts"
  (cd "$d" && env PATH="$stubs:$PATH" STUB_DIR="$d" TMPDIR="$d" ELASTIC_MPIRUN="$stubs/mpirun" \
    ELASTIC_PROBE="$stubs/probe" ELASTIC_PROBE_S=1 "${vars[@]}" \
    timeout 20 bash "$mpirun_script" "$d/hosts" 2 "$stubs/ringtrain" train job.toml "$@") >"$d/out" 2>&1
  rc=$?
}

call() { grep '^ringtrain ' "$d/log" | sed -n "${1}p"; }          # the argv of ringtrain's launch N
step() { grep -E '^(srun|mpirun) [0-9]' "$d/log" | sed -n "${1}p"; }  # launch N as the launcher was asked
steps() { grep -cE '^(srun|mpirun) [0-9]' "$d/log"; }
times_in() { call "$1" | grep -oF -- "$2" | wc -l; }
expect_rc() { [ "$rc" = "$1" ] || why+=("exit $rc, expected $1"); }
expect_steps() { [ "$(steps)" = "$1" ] || why+=("$(steps) launch(es), expected $1"); }
expect_in() { call "$1" | grep -qF -- "$2" || why+=("launch $1 lacks $2"); }
expect_not_in() { ! call "$1" | grep -qF -- "$2" || why+=("launch $1 has $2"); }
expect_out() { grep -qF -- "$1" "$d/out" || why+=("no message \"$1\""); }
# expect_dropped LOST KEPT: the launch failed once, and the second, the last, ran on KEPT with --failed-node LOST.
expect_dropped() {
  expect_rc 0
  expect_steps 2
  expect_in 2 "[--failed-node] [$1]"
  step 2 | grep -qF "[--nodelist=$2]" || why+=("restart not on $2: $(step 2)")
}
verdict() {  # verdict TEXT: ok, or FAIL with the reasons and what the scripts printed and were asked
  grep -q '^UNEXPECTED\|^RUNAWAY' "$d/log" && why+=("$(grep '^UNEXPECTED\|^RUNAWAY' "$d/log" | head -1)")
  if [ ${#why[@]} = 0 ]; then
    ok "$*"
  else
    fail "$*: $(printf '%s; ' "${why[@]}")"
    sed 's/^/       out: /' "$d/out" | tail -15
    sed 's/^/       log: /' "$d/log" | tail -15
  fi
}

# Real srun and Open MPI wording; the ringtrain messages are those of src/train/checkpointer.cpp and
# src/dist/watchdog.cpp.
killed_n2='srun: error: n2: tasks 2-3: Killed'

# ---------------------------------------------------------------------------------------------------- train.sbatch
# 1. The reviewers' defect: a glob over a folder named with brackets, or a run.dir given in CLI11's = form,
#    missed the checkpoint, and a restart then wiped the run with run.overwrite.
new_case c1
rd="$d/runs/lr[x]"
checkpoint "$rd"
printf '%s\n' "$killed_n2" | script 1 137
echo n2 >"$d/dead"
run_sbatch SLURM_RESTART_COUNT=1 -- --set="run.dir=$rd"
expect_rc 0
expect_steps 2
expect_in 1 '[--resume]'
expect_in 2 '[--resume] [--failed-node] [n2]'
grep -qF 'run.overwrite' "$d/log" && why+=("run.overwrite given: the checkpoint in $rd was not seen")
expect_in 2 "[--set=run.dir=$rd]"
verdict "1 --set=run.dir=DIR with brackets: requeue resumes, the restart after n2 is lost resumes (no run.overwrite)"

new_case c1b
checkpoint "$d/runs/lr[0.1]-4242"
run_sbatch SLURM_RESTART_COUNT=1 SLURM_JOB_NAME='lr[0.1]' --
expect_rc 0
expect_in 1 '[--resume]'
expect_in 1 "[run.dir=$d/runs/lr[0.1]-4242]"
verdict "1 job name with brackets (own run dir): the requeue resumes"

# 1c. A rank killed: its peer, writing to the dead rank's connection, can die of SIGPIPE and srun name it first. The
#     survivor's broken pipe is not the failure: the node whose task was killed is left out.
new_case c1c
checkpoint "$d/runs/rt-4242"
printf '%s\n' 'srun: error: n1: tasks 0-1: Broken pipe' "$killed_n2" | script 1 141
run_sbatch SLURM_RESTART_COUNT=0 --
expect_rc 0
expect_steps 2
expect_in 2 '[--resume] [--failed-node] [n2]'
verdict "1 a survivor's broken pipe named before the killed task: n2, the killed task's node, is left out"

# 2. ringtrain writes metrics.jsonl long before its first checkpoint; a requeue in between must start over rather
#    than meet ringtrain's "already holds a run" (exit 3).
new_case c2
mkdir -p "$d/runs/rt-4242"
: >"$d/runs/rt-4242/metrics.jsonl"
run_sbatch SLURM_RESTART_COUNT=1 --
expect_rc 0
expect_in 1 '[--set] [run.overwrite=true]'
expect_not_in 1 '[--resume]'
verdict "2 requeued before the first checkpoint: --set run.overwrite=true, no --resume"

# 2b. A file only named like a checkpoint (an extra leading zero) is not one, as ringtrain does not count it.
new_case c2b
mkdir -p "$d/runs/rt-4242/checkpoints"
: >"$d/runs/rt-4242/metrics.jsonl"
: >"$d/runs/rt-4242/checkpoints/ckpt-s0000000016.h5"
run_sbatch SLURM_RESTART_COUNT=1 --
expect_rc 0
expect_in 1 '[--set] [run.overwrite=true]'
expect_not_in 1 '[--resume]'
verdict "2 a stray ckpt-s0000000016.h5 is no checkpoint: the requeue starts over, no --resume"

# 3. A folder the user named may hold another job's run: continuing it must be the user's choice.
new_case c3
checkpoint "$d/named"
script 1 3 <<EOF
ringtrain: job file error (exit 3) [rank 0/4 on n1]:
  run.dir '$d/named' already holds a run (metrics.jsonl); give --resume to continue it
srun: error: n1: tasks 0-1: Exited with exit code 3
srun: error: n2: tasks 2-3: Exited with exit code 3
EOF
run_sbatch RT_RUN_DIR="$d/named" --
expect_rc 3
expect_steps 1
expect_not_in 1 '[--resume]'
expect_not_in 1 'run.overwrite'
verdict "3 first launch into RT_RUN_DIR holding a run: no --resume added, ringtrain's refusal (3) passed on"

new_case c3b
checkpoint "$d/named"
run_sbatch RT_RUN_DIR="$d/named" -- --resume
expect_rc 0
[ "$(times_in 1 '[--resume]')" = 1 ] || why+=("--resume given $(times_in 1 '[--resume]') times")
verdict "3 first launch into RT_RUN_DIR with the user's --resume: passed once"

# 4. Every rank exits 6 alike, so srun's lines name both nodes, the healthy one first; only ringtrain's message
#    says which rank is at fault.
new_case c4
checkpoint "$d/runs/rt-4242"
script 1 6 <<'EOF'
ringtrain: fault (exit 6) [rank 0/4 on n1]:
  parameters differ between ranks after epoch 2: ranks 0, 1, 2 hold aaaaaaaaaaaaaaaa; rank 3 holds bbbbbbbbbbbbbbbb; a non-deterministic reduction or memory corruption on the odd rank out (check that node); --resume continues from the last good checkpoint: ckpt-s000000008.h5
srun: error: n1: tasks 0-1: Exited with exit code 6
srun: error: n2: tasks 2-3: Exited with exit code 6
EOF
run_sbatch --
expect_dropped n2 n1
verdict "4 parameters differ, rank 3 the odd one out (2 nodes x 2 ranks): n2 dropped, restart on n1"

new_case c4b
checkpoint "$d/runs/rt-4242"
script 1 6 <<'EOF'
ringtrain: fault (exit 6) [rank 0/4 on n1]:
  the training step's all-reduce at step 12 has not completed after 3.0 s (run.collective_timeout_s = 3); rank 1 has not arrived
    rank 1: silent for 3.2 s (stopped, hung or unreachable), last at step 12 (computing or reading)
srun: error: n2: tasks 2-3: Exited with exit code 6
srun: error: n1: tasks 0-1: Exited with exit code 6
EOF
run_sbatch --
expect_dropped n1 n2
verdict "4 \"rank 1 has not arrived\" (srun names n2 first): n1 dropped, restart on n2"

# The watchdog's stall as it really ends a job: rank 0 names the missing rank and calls MPI_Abort, and srun reports
# every task killed, the healthy node's first.
new_case c4c
checkpoint "$d/runs/rt-4242"
script 1 137 <<'EOF'
ringtrain: stall (exit 6) [rank 0/4 on n1]:
  'the training step's all-reduce' at step 12 has not completed after 3.0 s (run.collective_timeout_s = 3); rank 3 has not arrived
  ending the job; raise run.collective_timeout_s if all-reduces legitimately take this long; checkpoints written so far survive
srun: error: n1: tasks 0-1: Killed
srun: error: n2: tasks 2-3: Killed
EOF
run_sbatch --
expect_dropped n2 n1
verdict "4c a stall blamed on rank 3, srun naming n1's tasks killed first: n2 dropped, restart on n1"

# Rank 0 itself stalled: another rank's watchdog ends the job, saying rank 0 did not.
new_case c4d
checkpoint "$d/runs/rt-4242"
script 1 137 <<'EOF'
ringtrain: stall (exit 6) [rank 2/4 on n2]:
  'the training step's all-reduce' at step 12 has not completed after 3.3 s (run.collective_timeout_s = 3); rank 0, which names the missing ranks, did not end the job, so this rank does
srun: error: n2: tasks 2-3: Killed
srun: error: n1: tasks 0-1: Killed
EOF
run_sbatch --
expect_dropped n1 n2
verdict "4d rank 0 stalled (rank 2 ended the job): n1 dropped, restart on n2"

# 5. The same code from every node (a wrong NCCL interface, a bug) would recur on fewer nodes.
new_case c5
checkpoint "$d/runs/rt-4242"
script 1 7 <<'EOF'
srun: error: n1: tasks 0-1: Exited with exit code 7
srun: error: n2: tasks 2-3: Exited with exit code 7
EOF
run_sbatch --
expect_rc 7
expect_steps 1
expect_out 'a failure of the job'
verdict "5 every node's tasks exit 7: no restart, exit 7, \"a failure of the job\""

# 6. srun that cannot start the ranks names no task; relaunching on the same nodes would only repeat it.
new_case c6
checkpoint "$d/runs/rt-4242"
script 1 1 norun <<'EOF'
srun: error: Couldn't find the specified plugin name for mpi/pmix looking at all files
srun: error: cannot find mpi plugin for mpi/pmix
srun: error: MPI: Cannot create context for mpi/pmix
srun: error: MPI: Unable to load any plugin
EOF
run_sbatch --
expect_rc 1
expect_steps 1
expect_out 'no node was'
grep -qx 'probe n1' "$d/log" && grep -qx 'probe n2' "$d/log" || why+=("not every node was probed")
verdict "6 srun cannot load mpi/pmix, every probe answers: no restart, exit 1, \"no node was lost\""

# 7. A bound that is not a number would leave the relaunch loop unbounded.
new_case c7
run_sbatch ELASTIC_MAX_RESTARTS=off --
expect_rc 2
expect_steps 0
expect_out "ELASTIC_MAX_RESTARTS='off'"
verdict "7 ELASTIC_MAX_RESTARTS=off: exit 2 naming the knob, nothing launched"

new_case c7b
run_sbatch RT_MAX_REQUEUES=x --
expect_rc 2
expect_steps 0
expect_out "RT_MAX_REQUEUES='x'"
verdict "7 RT_MAX_REQUEUES=x: exit 2 naming the knob, nothing launched"

new_case c7c
run_sbatch SLURM_NTASKS=3 --
expect_rc 2
expect_steps 0
expect_out "3 tasks do not divide over 2 nodes"
verdict "7 3 tasks on 2 nodes: exit 2, nothing launched (every launch places as many ranks on each node)"

# 8. ringtrain refuses a negative --seconds-lost with exit 2, which would end the job after a node loss.
new_case c8
checkpoint "$d/runs/rt-4242" "@$(($(date +%s) + 3600))"
printf '%s\n' "$killed_n2" | script 1 137
echo n2 >"$d/dead"
run_sbatch --
expect_rc 0
expect_in 2 '[--seconds-lost] [0]'
verdict "8 checkpoint stamped an hour ahead: --seconds-lost 0"

# 9. The checkpoint appears during the failed launch: the restart must look for it then, not at the start.
new_case c9
echo "$d/runs/rt-4242/checkpoints/ckpt-s000000004.h5" >"$d/ckpt.1"
printf '%s\n' "$killed_n2" 'srun: error: n1: tasks 0-1: Terminated' | script 1 137
echo n2 >"$d/dead"
run_sbatch --
expect_rc 0
expect_steps 2
expect_not_in 1 '[--resume]'
expect_in 2 '[--resume] [--failed-node] [n2] [--seconds-lost]'
call 2 | grep -qE '\[--seconds-lost\] \[[0-9]+\]' || why+=("--seconds-lost is not a count of seconds")
expect_not_in 2 'run.overwrite'
step 2 | grep -qF '[--nodelist=n1] [--ntasks=2] [--ntasks-per-node=2]' || why+=("restart not 2 ranks on n1: $(step 2)")
[ "$(grep -c 'elastic restart' "$d/out")" = 1 ] || why+=("not exactly one \"elastic restart\" line")
expect_out 'elastic restart 1/3: node n2 failed (exit 137)'
verdict "9 n2's tasks killed, n2 gone: one restart on n1 with --resume --failed-node n2"

# A node that vanishes whole leaves no task line; only the probe, bounded by ELASTIC_PROBE_S, can find it.
new_case probe
checkpoint "$d/runs/rt-4242"
script 1 137 <<<'srun: error: Node failure on n2'
echo 'n2 hang' >"$d/dead"
t=$SECONDS
run_sbatch --
expect_rc 0
expect_in 2 '[--failed-node] [n2]'
[ $((SECONDS - t)) -lt 8 ] || why+=("took $((SECONDS - t)) s: the hung probe was not cut at ELASTIC_PROBE_S=1")
verdict "probe: no task line, n2's probe hangs: n2 dropped after ELASTIC_PROBE_S"

new_case requeue
script 1 75 </dev/null
run_sbatch --
expect_rc 0
grep -qx 'scontrol requeue 4242' "$d/log" || why+=("no scontrol requeue 4242")
verdict "requeue: exit 75 requeues job 4242, the batch script ends 0"

new_case requeue_spent
script 1 75 </dev/null
run_sbatch SLURM_RESTART_COUNT=1 RT_MAX_REQUEUES=1 --
expect_rc 75
grep -q 'scontrol requeue' "$d/log" && why+=("requeued past RT_MAX_REQUEUES")
verdict "requeue: past RT_MAX_REQUEUES=1 the job ends with 75, no requeue"

new_case staging
# test/ a link to a folder elsewhere: the node's copy holds its shards, not the link (which would read the shared
# file system while the log says "staged", or dangle).
mkdir -p "$d/data/train" "$d/elsewhere/test"
touch "$d/data/train/shard-00000-of-00001.h5" "$d/elsewhere/test/shard-00000-of-00001.h5"
ln -s "$d/elsewhere/test" "$d/data/test"
run_sbatch RT_STAGE_DATA="$d/data" RT_STAGE_ROOT="$d/stage" -- --set data.train=/elsewhere
expect_rc 0
stage=$d/stage/ringtrain-stage-4242
call 1 | grep -qE "\[data.train=$stage/n1/train\] \[--set\] \[data.test=$stage/n1/test\]$" ||
  why+=("the node's copy is not the last data path given")
grep -q '^staged copy present' "$d/log" || why+=("the rank's copy was not there when it started")
grep -q '^staged test is a folder of shards' "$d/log" || why+=("the linked test/ was staged as a link")
[ ! -e "$stage" ] || why+=("$stage left behind")
verdict "staging: each rank reads its node's copy (last, over the job's data.train), a linked split copied as files, removed at the end"

new_case staging_empty
mkdir -p "$d/data/train" "$d/data/test"
run_sbatch RT_STAGE_DATA="$d/data" RT_STAGE_ROOT="$d/stage" --
expect_rc 4
expect_out 'hold no shard-*.h5 files'
[ -z "$(call 1)" ] || why+=("ringtrain was launched on an empty copy")
verdict "staging: split folders without shards are refused (exit 4) before any rank starts"

# ---------------------------------------------------------------------------------------------------- elastic_mpirun.sh
# 10. Open MPI reports the first process to exit non-zero by its name [[job,1],rank], not by host.
new_case c10
checkpoint "$d/run" "@$(($(date +%s) + 3600))"   # and clock skew, as in case 8
script 1 7 <<'EOF'
ringtrain: library call failed (exit 7) [rank 3/4 on B]: cudaMemcpyAsync: an illegal memory access was encountered
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4242,1],3]
  Exit code:    7
--------------------------------------------------------------------------
EOF
run_mpirun -- --set "run.dir=$d/run"
expect_rc 0
expect_steps 2
[ "$(step 2)" = "mpirun 2 np=2 hosts=A" ] || why+=("restart was \"$(step 2)\", expected 2 ranks on A")
expect_in 2 '[--resume] [--failed-node] [B] [--seconds-lost] [0]'
verdict "10 Open MPI names [[4242,1],3] with exit code 7: host B dropped, restart on A with --resume (seconds lost 0 under skew)"

# 10b. A stall under mpirun: rank 0's watchdog names the missing rank, then its MPI_Abort names rank 0.
new_case c10b
checkpoint "$d/run"
script 1 6 <<'EOF'
ringtrain: stall (exit 6) [rank 0/4 on A]:
  'the training step's all-reduce' at step 12 has not completed after 3.0 s (run.collective_timeout_s = 3); rank 3 has not arrived
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode 6.
--------------------------------------------------------------------------
EOF
run_mpirun -- --set "run.dir=$d/run"
expect_rc 0
expect_steps 2
[ "$(step 2)" = "mpirun 2 np=2 hosts=A" ] || why+=("restart was \"$(step 2)\", expected 2 ranks on A")
expect_in 2 '[--resume] [--failed-node] [B]'
verdict "10b a stall blamed on rank 3, MPI_Abort on rank 0: host B dropped, restart on A"

# 11. A launch that never started (daemons unreachable, no rank named) is not a lost host.
new_case c11
checkpoint "$d/run"
script 1 1 norun <<'EOF'
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:
* not finding the required libraries and/or binaries on
  one or more nodes.
--------------------------------------------------------------------------
EOF
run_mpirun -- --set "run.dir=$d/run"
expect_rc 1
expect_steps 1
grep -qx 'probe A true' "$d/log" && grep -qx 'probe B true' "$d/log" || why+=("not every host was probed")
expect_out 'no host'
verdict "11 mpirun names nothing and every host answers: no restart, exit 1"

# 12. CLI11's = form; brackets in the folder make a glob that is not quoted miss the checkpoint.
new_case c12
rd="$d/run [x]"
checkpoint "$rd"
script 1 137 <<<'mpirun noticed that process rank 2 with PID 0 on node B exited on signal 9 (Killed).'
run_mpirun -- --set="run.dir=$rd"
expect_rc 0
expect_steps 2
expect_in 1 "[--set=run.dir=$rd]"
expect_in 2 '[--resume] [--failed-node] [B]'
expect_not_in 2 'run.overwrite'
verdict "12 --set=run.dir=DIR (brackets) recognised: no usage error, the restart after B's rank 2 resumes"

# 14. mpirun names only a rank that died of SIGPIPE (writing to a killed peer's connection): not the failure, so no
# healthy host is dropped for it; every host answers, so no host is named and the job ends.
new_case c14
checkpoint "$d/run"
script 1 141 <<<'mpirun noticed that process rank 0 with PID 0 on node A exited on signal 13 (Broken pipe).'
run_mpirun -- --set "run.dir=$d/run"
expect_rc 141
expect_steps 1
expect_out 'no host'
verdict "14 mpirun names only rank 0's broken pipe: host A kept, no restart, exit 141"

# 13. Every rank printing the same ringtrain error (a wrong NCCL interface on every host): the job's failure, not a
# host's, even though Open MPI's block names one rank; no restart, no healthy host dropped.
new_case c13
checkpoint "$d/run"
script 1 7 <<'EOF'
ringtrain: library call failed (exit 7) [rank 0/4 on A]: ncclCommInitRank: unhandled system error
ringtrain: library call failed (exit 7) [rank 1/4 on A]: ncclCommInitRank: unhandled system error
ringtrain: library call failed (exit 7) [rank 2/4 on B]: ncclCommInitRank: unhandled system error
ringtrain: library call failed (exit 7) [rank 3/4 on B]: ncclCommInitRank: unhandled system error
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4242,1],2]
  Exit code:    7
--------------------------------------------------------------------------
EOF
run_mpirun -- --set "run.dir=$d/run"
expect_rc 7
expect_steps 1
expect_out 'every rank ended alike'
verdict "13 every rank exits 7 alike under mpirun: no restart, exit 7, no host dropped"

echo "$((SECONDS - t0)) s"
[ "$failures" = 0 ] || { echo "$failures case(s) failed"; exit 1; }
exit 0
