#!/bin/sh
# Regenerates the tc-cake golden files from the real kernel (Debian 6.1 sch_cake, iproute2 6.1).
# Run on the host:
#   /work/shared/tools/refkernel/run-in-guest.sh -o crates/cake/tests/golden/out \
#       crates/cake/tests/golden/collect.sh
# For every case below (NAME|MTU|ARGS) it attaches a fresh cake to a veth of that MTU and writes
#   NAME.json  = tc -j -s qdisc show     NAME.stats = tc -s qdisc show     NAME.show = tc qdisc show
# and for every error case (NAME|ARGS) NAME.err = tc's stderr and exit status.
# cases.txt / errors.txt list the cases so the tests can replay them without QEMU.
set -u
OUT=${OUT:-/out}
mkdir -p "$OUT"
ip netns add q
ip netns exec q sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6'
ip -n q link add qa type veth peer name qb
ip -n q link set qa up; ip -n q link set qb up
T="ip netns exec q tc"

cat > "$OUT/cases.txt" <<'CASES'
default|1500|
bw20|1500|bandwidth 20Mbit
bw100|1500|bandwidth 100mbit
bw_unlimited|1500|bandwidth 20Mbit unlimited
bw_bare|1500|bandwidth 1000000
bw_kbps|1500|bandwidth 1500kbps
bw_mibit|1500|bandwidth 10Mibit
bw_gbit|1500|bandwidth 1gbit
bw_2gbit|1500|bandwidth 2Gbit
bw_tbit|1500|bandwidth 1tbit
bw_small|1500|bandwidth 64kbit
bw_tiny|1500|bandwidth 100bit
bw_float|1500|bandwidth 1.5mbit
bw_upper|1500|bandwidth 20MBIT
bw_odd|1500|bandwidth 12345678bit
bw_mbps|1500|bandwidth 3mbps
besteffort|1500|bandwidth 50Mbit besteffort
diffserv4|1500|bandwidth 50Mbit diffserv4
diffserv8|1500|bandwidth 50Mbit diffserv8
precedence|1500|bandwidth 50Mbit precedence
precedence_unl|1500|precedence
diffserv4_unl|1500|diffserv4
flowblind|1500|flowblind nat wash
srchost|1500|srchost
dsthost|1500|dsthost ingress
hosts|1500|hosts ack-filter
flows|1500|flows ack-filter-aggressive
dual_srchost|1500|dual-srchost nonat nowash no-ack-filter egress
dual_dsthost|1500|dual-dsthost nat
no_split_gso|1500|bandwidth 10Mbit no-split-gso
split_gso|1500|bandwidth 10Mbit split-gso
rtt50|1500|bandwidth 20Mbit rtt 50ms
rtt_bare|1500|rtt 300
rtt_s|1500|rtt 0.5s
rtt_usec|1500|rtt 5000usec
rtt_tiny|1500|bandwidth 20Mbit rtt 1us
rtt_odd|1500|rtt 12345us
datacentre|1500|bandwidth 1gbit datacentre
lan|1500|bandwidth 1gbit lan
metro|1500|metro
regional|1500|bandwidth 20Mbit regional
internet|1500|bandwidth 20Mbit rtt 10ms internet
oceanic|1500|bandwidth 20Mbit oceanic
satellite|1500|bandwidth 5Mbit satellite
interplanetary|1500|bandwidth 5Mbit interplanetary
memlimit_mb|1500|bandwidth 20Mbit memlimit 32mb
memlimit_bare|1500|memlimit 100000
memlimit_k|1500|bandwidth 20Mbit memlimit 64k
memlimit_kbit|1500|memlimit 8kbit
memlimit_huge|1500|bandwidth 20Mbit memlimit 1g
fwmark|1500|bandwidth 20Mbit fwmark 0xff
fwmark_dec|1500|fwmark 7
autorate|1500|bandwidth 20Mbit autorate-ingress
autorate_unl|1500|autorate-ingress
overhead_mpu|1500|bandwidth 20Mbit overhead 18 mpu 64
overhead_neg|1500|overhead -4
overhead_min|1500|overhead -64
overhead_max|1500|overhead 256 mpu 256
conservative|1500|bandwidth 20Mbit conservative
raw|1500|bandwidth 20Mbit raw
raw_after|1500|bandwidth 20Mbit ethernet raw
pppoe_ptm|1500|bandwidth 40Mbit pppoe-ptm
bridged_ptm|1500|bandwidth 40Mbit bridged-ptm
ethernet|1500|bandwidth 100Mbit ethernet
ether_vlan|1500|bandwidth 100Mbit ether-vlan
ethernet_vlan|1500|bandwidth 100Mbit ethernet ether-vlan
docsis|1500|bandwidth 100Mbit docsis
pppoa_vcmux|1500|bandwidth 8Mbit pppoa-vcmux
pppoa_llc|1500|bandwidth 8Mbit pppoa-llc
pppoe_vcmux|1500|bandwidth 8Mbit pppoe-vcmux
pppoe_llcsnap|1500|bandwidth 8Mbit pppoe-llcsnap
ipoa_vcmux|1500|ipoa-vcmux
ipoa_llcsnap|1500|ipoa-llcsnap
bridged_vcmux|1500|bridged-vcmux
bridged_llcsnap|1500|bridged-llcsnap
atm_overhead|1500|bandwidth 8Mbit atm overhead 10
ptm|1500|ptm
noatm|1500|pppoe-vcmux noatm
eth_then_overhead|1500|ethernet overhead 20
overhead_then_eth|1500|overhead 20 ethernet
overhead_then_pppoe|1500|overhead 20 pppoe-ptm
mpu_then_eth|1500|mpu 100 ethernet
docsis_then_mpu|1500|docsis mpu 80
overhead0|1500|overhead 0
combo|1500|bandwidth 20Mbit diffserv4 dual-dsthost nat wash ack-filter split-gso rtt 100ms noatm overhead 18 mpu 64 memlimit 10mb fwmark 0xf00 ingress
last_wins|1500|bandwidth 10Mbit bandwidth 30Mbit diffserv8 besteffort flows hosts
mtu9000|9000|
mtu9000_bw|9000|bandwidth 1gbit
mtu9000_slow|9000|bandwidth 10Mbit diffserv4
mtu576|576|bandwidth 1Mbit
mtu576_unl|576|
mtu576_d8|576|bandwidth 2Mbit diffserv8 rtt 20ms
rtt_zero|1500|rtt 0
bw_zero|1500|bandwidth 0
autorate_then_bw|1500|autorate-ingress bandwidth 20Mbit
diffserv_alias|1500|diffserv
via_ethernet|1500|via-ethernet
raw_then_vlan|1500|raw ether-vlan
fwmark_octal|1500|fwmark 010
rtt_preset_then_rtt|1500|satellite rtt 40ms
memlimit_rate_1g|1500|bandwidth 10gbit
CASES

cat > "$OUT/errors.txt" <<'CASES'
unknown_word|foo
bad_rate|bandwidth foo
bad_rate_unit|bandwidth 10xbit
missing_rate|bandwidth
bad_rtt|rtt abc
bad_rtt_unit|rtt 10parsecs
overhead_high|overhead 300
overhead_low|overhead -65
overhead_bad|overhead abc
mpu_high|mpu 300
mpu_neg|mpu -1
fwmark_bad|fwmark xyz
memlimit_bad|memlimit abc
memlimit_unit|memlimit 10q
two_presets|lan metro
help|help
handle_word|handle 1:
rtt_ns|rtt 1000000ns
CASES

cur_mtu=0
while IFS='|' read -r name mtu args; do
  [ -z "$name" ] && continue
  if [ "$mtu" != "$cur_mtu" ]; then
    ip -n q link set qa mtu "$mtu"; ip -n q link set qb mtu "$mtu"; cur_mtu=$mtu
  fi
  $T qdisc del dev qa root 2>/dev/null
  # shellcheck disable=SC2086
  if ! $T qdisc add dev qa root handle 8001: cake $args 2>"$OUT/$name.adderr"; then
    echo "FAIL $name: $(cat "$OUT/$name.adderr")"
  fi
  [ -s "$OUT/$name.adderr" ] || rm -f "$OUT/$name.adderr"
  $T -j -s qdisc show dev qa > "$OUT/$name.json"
  $T -s qdisc show dev qa > "$OUT/$name.stats"
  $T qdisc show dev qa > "$OUT/$name.show"
done < "$OUT/cases.txt"

ip -n q link set qa mtu 1500; ip -n q link set qb mtu 1500
while IFS='|' read -r name args; do
  [ -z "$name" ] && continue
  $T qdisc del dev qa root 2>/dev/null
  # shellcheck disable=SC2086
  $T qdisc add dev qa root handle 8001: cake $args > "$OUT/$name.err" 2>&1
  echo "exit $?" >> "$OUT/$name.err"
done < "$OUT/errors.txt"
$T qdisc del dev qa root 2>/dev/null
ip netns del q
echo "kernel $(uname -r)  $(tc -V)" > "$OUT/VERSION"
echo done
