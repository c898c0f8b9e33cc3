#!/bin/bash
# Records sch_cake's statistics AFTER a known, deterministic set of packets (Debian 6.1 kernel,
# iproute2 6.1), so tests/tc_traffic_golden.rs can replay the same frames through our engine.
# Run on the host:
#   /work/shared/tools/refkernel/run-in-guest.sh -o crates/cake/tests/golden/traffic \
#       crates/cake/tests/golden/traffic/collect.sh
# Topology: veth0 (root netns, 10.9.0.1, 02:00:00:00:00:01) <-> veth1 (netns p, 10.9.0.2,
# 02:00:00:00:00:02). IPv6 is disabled and neighbour entries are static, so the only packets that
# cross veth0's egress (where cake sits) are ours: no ARP, ND, MLD or IGMP. Replies travel the
# other way and are not seen by the qdisc.
# Outputs: cases.txt (NAME|ARGS), traffic.txt (the packets sent, in order, one per line:
#   "icmp DSCP ECN PAYLOAD IPLEN" = ping -Q (DSCP<<2|ECN) -s PAYLOAD, or
#   "udp 0 0 PAYLOAD IPLEN" = one UDP datagram 10.9.0.1:* -> 10.9.0.2:9 with PAYLOAD bytes),
# NAME.json = tc -j -s qdisc show dev veth0, NAME.stats = tc -s qdisc show dev veth0.
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

cat > "$OUT/cases.txt" <<'CASES'
diffserv3|bandwidth 1Gbit
diffserv4|bandwidth 1Gbit diffserv4
diffserv8|bandwidth 1Gbit diffserv8
precedence|bandwidth 1Gbit precedence
besteffort|bandwidth 1Gbit besteffort
wash|bandwidth 1Gbit wash
wash_diffserv4|bandwidth 1Gbit diffserv4 wash
unlimited_diffserv8|diffserv8
ethernet|bandwidth 1Gbit ethernet
ether_vlan|bandwidth 1Gbit ether-vlan
pppoe_ptm|bandwidth 1Gbit pppoe-ptm
bridged_ptm|bandwidth 1Gbit bridged-ptm
conservative|bandwidth 1Gbit conservative
docsis|bandwidth 1Gbit docsis
mpu64_overhead_neg4|bandwidth 1Gbit overhead -4 mpu 64
bridged_llcsnap|bandwidth 1Gbit bridged-llcsnap
pppoa_vcmux|bandwidth 1Gbit pppoa-vcmux
overhead0|bandwidth 1Gbit overhead 0
mpu_only|bandwidth 1Gbit mpu 96
raw|bandwidth 1Gbit ethernet raw
precedence_ingress|bandwidth 1Gbit precedence ingress dual-dsthost nat
CASES

# The traffic: one echo request per DSCP with varied sizes and ECN bits, then UDP datagrams.
: > "$OUT/traffic.txt"
for dscp in $(seq 0 63); do
  payload=$(( (dscp * 397 + 3) % 1473 ))
  echo "icmp $dscp $((dscp % 4)) $payload $((payload + 28))" >> "$OUT/traffic.txt"
done
for payload in 1 18 100 555 1000 1471 1472; do
  echo "udp 0 0 $payload $((payload + 28))" >> "$OUT/traffic.txt"
done

send_traffic() {
  local kind dscp ecn payload iplen
  while read -r kind dscp ecn payload iplen; do
    case $kind in
      icmp) ping -n -q -c 1 -W 1 -Q $(( (dscp << 2) | ecn )) -s "$payload" 10.9.0.2 > /dev/null \
              || echo "ping dscp $dscp lost its reply (the request still counts)";;
      udp) head -c "$payload" /dev/zero > /dev/udp/10.9.0.2/9;;
    esac
  done < "$OUT/traffic.txt"
}

while IFS='|' read -r name args; do
  [ -z "$name" ] && continue
  tc qdisc del dev veth0 root 2>/dev/null
  # shellcheck disable=SC2086
  tc qdisc add dev veth0 root handle 8001: cake $args || echo "FAIL $name"
  send_traffic
  sleep 0.05
  tc -j -s qdisc show dev veth0 > "$OUT/$name.json"
  tc -s qdisc show dev veth0 > "$OUT/$name.stats"
  echo "$name: $(tc -s qdisc show dev veth0 | sed -n 2p)"
done < "$OUT/cases.txt"
tc qdisc del dev veth0 root 2>/dev/null
ip netns del p
echo "kernel $(uname -r)  $(tc -V)" > "$OUT/VERSION"
echo done
