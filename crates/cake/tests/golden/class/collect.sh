#!/bin/bash
# Records what `tc -s class show` prints for cake's per-flow classes while several flows are
# backlogged (Debian 6.1 kernel, iproute2 6.1), for tests/tc_class_golden.rs. Run on the host:
#   /work/shared/tools/refkernel/run-in-guest.sh -o crates/cake/tests/golden/class \
#       crates/cake/tests/golden/class/collect.sh
# Topology as in ../traffic/collect.sh: veth0 (root netns, 10.9.0.1) <-> veth1 (netns p,
# 10.9.0.2), IPv6 off, static neighbours. cake on veth0 egress at 1 Mbit so queues build.
# Traffic (all from the root netns to 10.9.0.2): iperf3 UDP, 3 streams x 2 Mbit/s (Best Effort),
# ping -Q 0x20 (CS1: Bulk) and ping -Q 0xb8 (EF: Voice). Per case NAME (cases below):
#   NAME.class   = tc -s class show dev veth0     NAME.class_j = tc -j -s class show dev veth0
#   NAME.stats   = tc -s qdisc show dev veth0     NAME.json    = tc -j -s qdisc show dev veth0
# all taken within a few ms of each other while the traffic runs. Note: iproute2 6.1 has no JSON
# output for `tc class`: with -j it prints the same text as without, so NAME.class_j is text.
set -u
OUT=${OUT:-/out}
mkdir -p "$OUT"
sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip netns add p
ip netns exec p sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip link add veth0 address 02:00:00:00:00:01 type veth peer name veth1 address 02:00:00:00:00:02
ip link set veth1 netns p
sysctl -qw net.ipv6.conf.veth0.disable_ipv6=1
ip netns exec p sysctl -qw net.ipv6.conf.veth1.disable_ipv6=1
ip addr add 10.9.0.1/24 dev veth0
ip -n p addr add 10.9.0.2/24 dev veth1
ip neigh replace 10.9.0.2 lladdr 02:00:00:00:00:02 dev veth0 nud permanent
ip -n p neigh replace 10.9.0.1 lladdr 02:00:00:00:00:01 dev veth1 nud permanent
ip link set veth0 up
ip -n p link set lo up
ip -n p link set veth1 up
sleep 0.2

# "plain": the default memory limit (4 MB), so COBALT drops but BLUE stays off.
# "overflow": a small memory limit, so the queue overflows and BLUE engages (p_drop > 0).
cat > "$OUT/cases.txt" <<'CASES'
plain|bandwidth 1mbit
overflow|bandwidth 1mbit memlimit 40k
CASES

while IFS='|' read -r name args; do
  [ -z "$name" ] && continue
  tc qdisc del dev veth0 root 2>/dev/null
  # shellcheck disable=SC2086
  tc qdisc add dev veth0 root handle 8001: cake $args || echo "FAIL $name"
  ip netns exec p iperf3 -s -D -1 > /dev/null 2>&1
  sleep 0.3
  iperf3 -c 10.9.0.2 -u -b 2M -P 3 -l 1200 -t 8 > /dev/null 2>&1 &
  ipf=$!
  ping -n -q -Q 0x20 -i 0.02 -s 1000 -w 8 10.9.0.2 > /dev/null 2>&1 &
  p1=$!
  ping -n -q -Q 0xb8 -i 0.05 -s 200 -w 8 10.9.0.2 > /dev/null 2>&1 &
  p2=$!
  sleep 4
  tc -j -s class show dev veth0 > "$OUT/$name.class_j"
  tc -s class show dev veth0 > "$OUT/$name.class"
  tc -j -s qdisc show dev veth0 > "$OUT/$name.json"
  tc -s qdisc show dev veth0 > "$OUT/$name.stats"
  kill "$ipf" "$p1" "$p2" 2>/dev/null
  wait "$ipf" "$p1" "$p2" 2>/dev/null
  echo "$name: $(grep -c '^class' "$OUT/$name.class") classes"
  sleep 1
done < "$OUT/cases.txt"
tc qdisc del dev veth0 root 2>/dev/null
ip netns del p
echo "kernel $(uname -r)  $(tc -V)" > "$OUT/VERSION"
echo done
