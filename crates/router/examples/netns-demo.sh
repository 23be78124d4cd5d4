#!/bin/bash
# A standalone aqmlab-router: one sender namespace, the router namespace (TUN + policy rule)
# and a receiver namespace, as the emulator builds them (crates/router/README.md). Runs one
# TCP flow for 6 s through a 20 Mbit/s STEP bottleneck with a 20 ms base RTT (RATE=bit/s,
# BUF=packets, AQM=json override them), prints the router's per-flow results, and removes
# everything it made.
#
#   cargo build --release -p router && sudo crates/router/examples/netns-demo.sh
set -euo pipefail
RATE=${RATE:-20000000} BUF=${BUF:-200}
AQM=${AQM:-'{"kind": "step", "threshold": {"bytes": 25000}}'}
BIN=${BIN:-$(dirname "$0")/../../../target/release/aqmlab-router}
T=demo$$
S=aqS0-$T R=aqR-$T D=aqD-$T
WORK=$(mktemp -d)
cleanup() { for n in $S $R $D; do ip netns del "$n" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM

ip netns add $S; ip netns add $R; ip netns add $D
ip link add s0 netns $S type veth peer name r0 netns $R
ip link add d0 netns $D type veth peer name r1 netns $R
ip -n $S addr add 10.77.1.2/24 dev s0;   ip -n $S link set s0 up; ip -n $S link set lo up
ip -n $R addr add 10.77.1.1/24 dev r0;   ip -n $R link set r0 up
ip -n $R addr add 10.77.200.1/24 dev r1; ip -n $R link set r1 up
ip -n $D addr add 10.77.200.2/24 dev d0; ip -n $D link set d0 up; ip -n $D link set lo up
ip -n $S route add default via 10.77.1.1
ip -n $D route add default via 10.77.200.1
# Wire-size packets: no segmentation offloads anywhere on the path.
for x in "$S s0" "$R r0" "$R r1" "$D d0"; do set -- $x; ip netns exec $1 ethtool -K $2 tso off gso off gro off >/dev/null 2>&1 || true; done
ip netns exec $S sysctl -qw net.ipv4.tcp_ecn=1
# The router namespace: forward, no reverse-path filter, and data from the sender's veth
# into the TUN device (table 100); what the router writes back is routed by the main table.
ip netns exec $R sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
ip -n $R tuntap add dev aqtun mode tun
ip -n $R link set aqtun up mtu 1500
ip netns exec $R sysctl -qw net.ipv4.conf.aqtun.rp_filter=0 net.ipv4.conf.r0.rp_filter=0
ip -n $R rule add iif r0 lookup 100
ip -n $R route add default dev aqtun table 100

cat > $WORK/router.json <<J
{"tun": "aqtun", "class_sources": ["10.77.1.0/24"], "output": "$WORK/out.json",
 "engine": {"name": "demo", "seed": 1, "duration_ns": 6000000000, "warmup_ns": 1000000000,
   "bottleneck": {"rate_bps": $RATE, "buffer_packets": $BUF, "buffer_bytes": null,
                  "aqm": $AQM, "rtt_ref_ns": 10000000},
   "classes": [{"name": "cubic", "cc": {"name": "cubic"}, "count": 1, "rtt_ns": 20000000, "ecn": true,
                "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": null, "fq_pacing": false}],
   "measure": {"interval_ns": 100000000, "hist_bin_ns": 1000000}}}
J
ip netns exec $R "$BIN" --config $WORK/router.json --realtime > $WORK/router.out &
ROUTER=$!
until grep -q ready $WORK/router.out 2>/dev/null; do kill -0 $ROUTER 2>/dev/null || exit 1; sleep 0.05; done
ip netns exec $D python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('10.77.200.2', 5201)); s.listen(1); c, _ = s.accept(); c.settimeout(3)
try:
    while c.recv(1 << 16): pass
except OSError: pass" &
sleep 0.2
ip netns exec $S python3 -c "
import socket, time
s = socket.create_connection(('10.77.200.2', 5201)); s.settimeout(1); t = time.time()
try:  # until the router has stopped (6 s + 200 ms drain): the window [1 s, 6 s) stays busy
    while time.time() - t < 6.5: s.sendall(b'x' * 65536)
except OSError: pass
s.close()"
wait $ROUTER
python3 - "$WORK/out.json" <<'P'
import json, sys
r = json.load(open(sys.argv[1]))
lo, hi = r["window_ns"]
for f in r["flows"]:
    mean = f["sojourn_sum_ns"] / max(f["sojourn_count"], 1) / 1e6
    print(f"{f['src']}:{f['sport']} -> {f['dst']}:{f['dport']}  {f['link_bytes'] * 8 / (hi - lo) * 1e3:.2f} Mbit/s  "
          f"marked {f['marked_pkts']}  dropped {f['dropped_pkts']}  mean sojourn {mean:.2f} ms")
print("utilization", round(r["link_bytes"] * 8 / ((hi - lo) / 1e9) / r["rate_bps"], 3), "counters", r["counters"])
P
