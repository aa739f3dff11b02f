# Sourced by the multihost tests: what every test of network namespaces as hosts needs.

# netns_hosts_begin SCRATCH NAMESPACE...: on exit (or INT/TERM) delete the namespaces (which takes their veth
# pairs with them) and SCRATCH; create the first namespace, and exit 77 (CTest's skip) if this machine cannot.
netns_hosts_begin() {
  netns_scratch=$1
  shift
  netns_names=("$@")
  trap 'for n in "${netns_names[@]}"; do ip netns del "$n" 2>/dev/null; done; rm -rf "$netns_scratch"' EXIT
  trap 'exit 1' INT TERM
  if ! ip netns add "${netns_names[0]}" 2>"$netns_scratch/err"; then
    echo "SKIP: cannot create network namespaces here: $(cat "$netns_scratch/err")"
    exit 77
  fi
}

# netns_pair_up NS_A NS_B VETH_A VETH_B ADDR_A ADDR_B: after netns_hosts_begin (which made NS_A), NS_B and a veth
# pair between them, each end with its /24 address, every link up. Returns non-zero at the first step that fails.
netns_pair_up() {
  local a=$1 b=$2 va=$3 vb=$4 ns
  ip netns add "$b" &&
    ip link add "$va" type veth peer name "$vb" &&
    ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
    ip -n "$a" addr add "$5/24" dev "$va" && ip -n "$b" addr add "$6/24" dev "$vb" || return 1
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up || return 1; done
  ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up
}

# netns_write_launcher FILE ADDRESS=NAMESPACE...: the ssh stand-in for Open MPI's plm_rsh_agent. "FILE HOST
# CMD..." runs CMD in HOST's namespace; like ssh, the rest is one shell line. Every "host" shares this
# machine's hostname and /tmp, and daemons starting at once raced to create the same Open MPI session
# directory ("mkdir ... File exists"), so each namespace gets its own under the scratch folder.
netns_write_launcher() {
  local file=$1 pair
  shift
  {
    echo '#!/bin/sh'
    echo 'host=$1; shift'
    echo 'case "$host" in'
    for pair in "$@"; do echo "  ${pair%%=*}) ns=${pair#*=} ;;"; done
    echo '  *) echo "launcher: unknown host $host" >&2; exit 255 ;;'
    echo 'esac'
    echo "mkdir -p $netns_scratch/session-\$ns"
    echo "export OMPI_MCA_orte_tmpdir_base=$netns_scratch/session-\$ns"
    echo 'exec ip netns exec "$ns" /bin/sh -c "$*"'
  } >"$file"
  chmod +x "$file"
}
