# cluster.sh — a throw-away Slurm cluster on this machine, for tests: munged, slurmctld and N slurmd "nodes"
# (Debian's slurmd is built with --enable-multiple-slurmd, so several run on one host, each with its own port,
# spool and TmpFS). Everything lives under one scratch folder; the daemons are stopped by the PIDs recorded
# when they were started, never by name. Source it, then:
#   cluster_up SCRATCH n1 n2   -> exports SLURM_CONF; returns non-zero (and says why) if the nodes never go idle
#   cluster_down               -> stops exactly the daemons cluster_up started, waits for them to exit
# Needs root (slurmd runs jobs as the submitting user and munged's key must be private).

cluster_pids=()

cluster_install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && return 0
  echo "cluster: installing slurm-wlm and munge"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurm-wlm munge >/dev/null
}

# A TCP port nobody listens on, from a range unlikely to be used by anything else on a CI machine.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    ss -Htln "sport = :$port" | grep -q . || { echo "$port"; return; }
  done
}

cluster_start() {  # cluster_start NAME LOG CMD...: start a daemon in the foreground of a background job
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  cluster_pids+=($!)
  echo "cluster: started $name (pid $!)"
}

cluster_up() {
  local scratch=$1
  shift
  local nodes=("$@")
  cluster_dir=$scratch
  mkdir -p "$scratch"/{munge/etc,munge/run,log,state,run}
  chmod 755 "$scratch" "$scratch/munge" "$scratch/munge/run"   # munged refuses a socket dir others can write
  chmod 700 "$scratch/munge/etc"
  head -c 1024 /dev/urandom >"$scratch/munge/etc/munge.key"
  chmod 600 "$scratch/munge/etc/munge.key"
  cluster_start munged "$scratch/log/munged.out" munged --foreground --socket="$scratch/munge/run/munge.socket" \
    --key-file="$scratch/munge/etc/munge.key" --pid-file="$scratch/munge/run/munged.pid" \
    --log-file="$scratch/log/munged.log" --seed-file="$scratch/munge/etc/munged.seed"
  for _ in $(seq 50); do [ -S "$scratch/munge/run/munge.socket" ] && break; sleep 0.1; done

  local ctld_port
  ctld_port=$(free_port)
  export SLURM_CONF=$scratch/slurm.conf
  {
    echo "ClusterName=rttest"
    echo "SlurmctldHost=localhost"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "SlurmctldPort=$ctld_port"
    echo "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"   # listen on loopback only
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    # cred_expire also delays a requeued job (default 120 s); 5 s (the minimum) keeps the requeue test short.
    echo "AuthInfo=socket=$scratch/munge/run/munge.socket,cred_expire=5"
    echo "StateSaveLocation=$scratch/state"
    echo "SlurmdSpoolDir=$scratch/spool/%n"
    echo "TmpFS=$scratch/tmp/%n"
    echo "SlurmctldPidFile=$scratch/run/slurmctld.pid"
    echo "SlurmdPidFile=$scratch/run/slurmd.%n.pid"
    echo "SlurmctldLogFile=$scratch/log/slurmctld.log"
    echo "SlurmdLogFile=$scratch/log/slurmd.%n.log"
    echo "MailProg=/bin/true"
    echo "ProctrackType=proctrack/linuxproc"   # no cgroups needed
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "SchedulerParameters=sched_interval=2"   # a requeued job starts seconds after it is eligible, not a minute
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "MinJobAge=600"                       # finished jobs stay visible to scontrol (no accounting here)
    echo "KillWait=30"   # Slurm's default: the SIGKILL test must not rely on a short one
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    local n
    for n in "${nodes[@]}"; do
      echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(free_port) CPUs=2 Sockets=1" \
           "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=500 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$SLURM_CONF"
  for n in "${nodes[@]}"; do mkdir -p "$scratch/spool/$n" "$scratch/tmp/$n"; done

  cluster_start slurmctld "$scratch/log/slurmctld.out" slurmctld -D -i -f "$SLURM_CONF"
  for n in "${nodes[@]}"; do
    cluster_start "slurmd $n" "$scratch/log/slurmd.$n.out" slurmd -D -N "$n" -f "$SLURM_CONF"
  done
  for _ in $(seq 1200); do  # a busy machine can take a while to start three daemons; this returns when they are up
    [ "$(sinfo -h -t idle -o %D 2>/dev/null)" = "${#nodes[@]}" ] && return 0
    sleep 0.1
  done
  echo "cluster: the ${#nodes[@]} nodes did not become idle in 120 s:"
  sinfo 2>&1
  tail -n 5 "$scratch"/log/*.log 2>/dev/null
  return 1
}

cluster_down() {
  local pid
  # Jobs first: slurmstepd outlives slurmd, so a job left running would outlive the cluster.
  if [ -n "${SLURM_CONF:-}" ] && [ ${#cluster_pids[@]} -gt 0 ]; then
    scancel --quiet --user="$(id -un)" 2>/dev/null
    for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  for pid in "${cluster_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${cluster_pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [ ${#cluster_pids[@]} -gt 0 ] && echo "cluster: stopped pids ${cluster_pids[*]}"
  cluster_pids=()
}

# job_state JOBID -> e.g. RUNNING; job_field JOBID Field -> that field of `scontrol show job -o`
job_field() { scontrol show job -o "$1" 2>/dev/null | grep -o "\b$2=[^ ]*" | head -1 | cut -d= -f2-; }
job_state() { job_field "$1" JobState; }
