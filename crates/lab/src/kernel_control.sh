# The guest side of `purple lab run radio --kernel --qdisc purple` (crate purple-lab,
# kernel_control.rs prepends the parameters: MODES HI LO UP BUF STEP IDLE LOAD DMIN DBASE
# DMAX UMIN UBASE UMAX). Runs inside the reference kernel (Linux's own sch_cake), as root.
# A mode is a daemon algorithm (purple control, actuator netlink, on CAKE r0/r1) or "static".
#
#   cli c0 -- r0 [rtr] r1 -- l0 [lnk] l1 -- s0 srv
#   10.79.1.1   CAKE on r0 (down)   netem rate on l0 (down capacity, steps HI <-> LO)
#               CAKE on r1 (up)     netem rate on l1 (up capacity UP)
#
# Writes under /out/MODE/: cap.log ("wall_s mbit" per capacity change), cake.log ("wall_s
# JSON" of `tc -j qdisc show dev r0` mid-step and a second before every step ends),
# control.toml and control.jsonl (the daemon's configuration and decisions), ping.txt
# (`ping -D` client -> server every 100 ms), iperf.json and epoch (wall time the load began);
# /out/setup.log and /out/tc-batch.log.
set -u
cd /test
export LD_LIBRARY_PATH=/test/lib
say() { echo "kdemo: $*"; }
nsx() { n=$1; shift; ip netns exec "$n" "$@"; }
now_us() { echo "${EPOCHREALTIME/./}"; }
# Sleeps until the wall time $1 (us since the epoch); at once if it has passed.
sleep_until() {
    d=$(( $1 - $(now_us) ))
    [ $d -gt 0 ] && sleep "$(printf '%d.%06d' $((d / 1000000)) $((d % 1000000)))"
    return 0
}

setup() {
    for n in cli rtr lnk srv; do ip netns add $n || return 1; done
    ip link add c0 netns cli type veth peer name r0 netns rtr || return 1
    ip link add r1 netns rtr type veth peer name l0 netns lnk || return 1
    ip link add l1 netns lnk type veth peer name s0 netns srv || return 1
    ip -n cli addr add 10.79.1.1/24 dev c0
    ip -n rtr addr add 10.79.1.254/24 dev r0
    ip -n rtr addr add 10.79.2.1/24 dev r1
    ip -n lnk addr add 10.79.2.2/24 dev l0
    ip -n lnk addr add 10.79.3.254/24 dev l1
    ip -n srv addr add 10.79.3.1/24 dev s0
    for p in cli:c0 rtr:r0 rtr:r1 lnk:l0 lnk:l1 srv:s0; do
        n=${p%%:*}; d=${p#*:}
        ip -n $n link set lo up
        ip -n $n link set $d up || return 1
        nsx $n ethtool -K $d tso off gso off gro off >/dev/null 2>&1
    done
    ip -n cli route add default via 10.79.1.254
    ip -n rtr route add default via 10.79.2.2
    ip -n lnk route add default via 10.79.2.1
    ip -n srv route add default via 10.79.3.254
    nsx rtr sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
    nsx lnk sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
    nsx cli sh -c 'echo 1 > /proc/sys/net/ipv4/tcp_ecn'
    nsx srv sh -c 'echo 1 > /proc/sys/net/ipv4/tcp_ecn'
    nsx lnk tc qdisc add dev l0 root netem delay 10ms rate ${HI}mbit limit $BUF || return 1
    nsx lnk tc qdisc add dev l1 root netem delay 10ms rate ${UP}mbit limit $BUF || return 1
    # Capacity changes go through one long-lived `tc -batch` (an exec of tc costs about a
    # second under TCG); fd 7 keeps its fifo open.
    mkfifo /tmp/capfifo || return 1
    ip netns exec lnk tc -force -batch /tmp/capfifo > /out/tc-batch.log 2>&1 &
    exec 7<>/tmp/capfifo
    nsx srv ./purple reflector --bind 10.79.3.1 --port 8862 >/dev/null 2>&1 &
    return 0
}

config() {
    cat <<CFG
algorithm = "$2"
counter_interval_ms = 100

[download]
interface = "r0"
counter = "tx"
min_mbit = $DMIN
base_mbit = $DBASE
max_mbit = $DMAX

[upload]
interface = "r1"
counter = "tx"
min_mbit = $UMIN
base_mbit = $UBASE
max_mbit = $UMAX

[probe]
reflectors = ["udp:10.79.3.1:8862"]
rate_hz = 20
active = 1
min_interval_ms = 0
timeout_ms = 500

[actuator]
kind = "netlink"
min_interval_ms = 100

[log]
path = "$1"
every_step = true
max_bytes = 1000000000
keep = 0
CFG
}

# Appends "WALL JSON" of the router's r0 qdisc to $o/cake.log.
readback() { echo "$EPOCHREALTIME $(nsx rtr tc -j qdisc show dev r0)" >> $o/cake.log; }

run_mode() {
    mode=$1; o=/out/$mode; mkdir -p $o
    echo "qdisc change dev l0 root netem delay 10ms rate ${HI}mbit limit $BUF" >&7
    nsx rtr tc qdisc del dev r0 root 2>/dev/null
    nsx rtr tc qdisc del dev r1 root 2>/dev/null
    if [ "$mode" != static ]; then
        nsx rtr tc qdisc add dev r0 root cake bandwidth ${DBASE}mbit besteffort
        nsx rtr tc qdisc add dev r1 root cake bandwidth ${UBASE}mbit besteffort
    else
        nsx rtr tc qdisc add dev r0 root cake bandwidth ${HI}mbit besteffort
        nsx rtr tc qdisc add dev r1 root cake bandwidth ${UP}mbit besteffort
    fi
    nsx srv iperf3 -s -D -1 >/dev/null 2>&1
    dpid=
    : > $o/cake.log
    total=$((IDLE + LOAD + 1))
    nsx cli ping -D -n -i 0.1 -w $total 10.79.3.1 > $o/ping.txt 2>&1 &
    ppid=$!
    echo "$EPOCHREALTIME $HI" > $o/cap.log
    sleep $IDLE
    if [ "$mode" != static ]; then
        # The daemon starts with the load (see kernel_control.rs: on an idle link one TCG
        # scheduling spike above PURPLE's 5 ms target cuts it to its minimum).
        config $o/control.jsonl $mode > $o/control.toml
        # `ip netns exec` execs the daemon, so $! is the daemon itself.
        ip netns exec rtr ./purple control --config $o/control.toml > $o/control.err 2>&1 &
        dpid=$!
    fi
    t0=$(now_us)
    echo "$EPOCHREALTIME" > $o/epoch
    nsx cli iperf3 -c 10.79.3.1 -R -t $LOAD -i 0.5 -J > $o/iperf.json 2>&1 &
    ipid=$!
    rate=$HI; el=0
    while [ $((el + STEP)) -lt $LOAD ]; do
        el=$((el + STEP))
        # Read the kernel CAKE's rate back mid-step and a second before the step ends, then
        # step.
        sleep_until $((t0 + el * 1000000 - STEP * 500000))
        readback
        sleep_until $((t0 + el * 1000000 - 1000000))
        readback
        sleep_until $((t0 + el * 1000000))
        if [ $rate = $HI ]; then rate=$LO; else rate=$HI; fi
        echo "qdisc change dev l0 root netem delay 10ms rate ${rate}mbit limit $BUF" >&7
        echo "$EPOCHREALTIME $rate" >> $o/cap.log
    done
    sleep_until $((t0 + (el + LOAD) * 500000))
    readback
    sleep_until $((t0 + LOAD * 1000000 - 500000))
    readback
    wait $ipid
    wait $ppid
    if [ -n "$dpid" ]; then kill -TERM $dpid; wait $dpid; fi
    nsx rtr tc -s -j qdisc show dev r0 > $o/cake-final.json
    say "$mode done"
}

setup > /out/setup.log 2>&1 || { cat /out/setup.log; say "setup failed"; exit 2; }
for m in $MODES; do run_mode $m; done
exit 0
