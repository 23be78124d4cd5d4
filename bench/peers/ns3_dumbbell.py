#!/usr/bin/env python3
"""ns-3 peer of aqmlab's speed benchmark (crates/sim/examples/bench.rs).

Builds the same dumbbell as aqmlab's benchmark scenarios in ns-3 (Python bindings of the
`ns3` wheel on PyPI, pinned to 3.44.post0 by compare.sh), runs it, and prints one line:

    peer=ns3 scenario=a flows=20 ... wall_s=... bottleneck_pkts=... pkts_per_s=... utilization=...

Only Simulator.Run() is timed; building the topology through the bindings is not.

Topology (all point-to-point):

    sender_i --(access, 100 Gbps, 0 delay)--> R1 ==(bottleneck, RATE, RTT/2 each way)==> R2
      R2 --(access, 100 Gbps, 0 delay)--> receiver_i

  * the whole two-way propagation delay sits on the bottleneck link (RTT/2 each way), as in
    aqmlab where the forward path has R/2 after the queue and the reverse path R - R/2;
  * the only queue that builds is the bottleneck's queue disc on R1's device towards R2:
      - scenario a: FifoQueueDisc (TailDrop) with a BYTE-mode limit (--buffer-bytes,
        default 1 250 000 B = 1 BDP; 833 full 1500-byte packets);
      - scenario b: RedQueueDisc as a DCTCP step marker: byte mode, MinTh = MaxTh = K
        (--k-bytes, default 1 062 500 B), QW = 1 (instantaneous queue), Gentle off,
        UseEcn on, UseHardDrop off, and a byte limit of --buffer-bytes (default 500 ms =
        625 000 000 B, as aqmlab's scenario b);
    the bottleneck device's own transmit queue is cut to 1 packet so the queue disc holds
    the backlog (the usual ns-3 practice); every other device has no queue disc (ns-3's
    default FqCoDel is removed) and its default 100-packet DropTail device queue, which
    never fills at 100 Gbps;
  * TCP: ns3::TcpCubic (a) or ns3::TcpDctcp (b), SegmentSize 1448 with timestamps, so a
    full segment is 1448 + 32 (TCP + TS option) + 20 (IP) = 1500 B IP, SACK on, IW 10,
    PRR recovery, MinRto 200 ms (Linux), delayed ACK every 2 segments, 8 MB socket buffers
    so no flow is window- or application-limited; one BulkSendApplication per flow, started
    uniformly in [0, 1 s) (Python's random.Random(seed)).

Counting: the bottleneck queue disc's statistics (packets and IP bytes handed to the
bottleneck device), read after Simulator.Run(); nothing is traced from Python during the
run, so the timed region is pure C++.
"""

import argparse
import random
import sys
import time

SCENARIOS = {
    # name: rate, rtt_ms, flows, cc, buffer_bytes, aqm, k_bytes, duration_s
    "a": dict(rate="1Gbps", rtt_ms=10.0, flows=20, cc="cubic", buffer_bytes=1_250_000, aqm="fifo", k_bytes=None, duration=30.0),
    "b": dict(rate="10Gbps", rtt_ms=5.0, flows=100, cc="dctcp", buffer_bytes=625_000_000, aqm="red-step", k_bytes=1_062_500, duration=10.0),
}

CC_TYPES = {"cubic": "ns3::TcpCubic", "dctcp": "ns3::TcpDctcp", "newreno": "ns3::TcpNewReno"}


def parse_rate(s: str) -> float:
    s = s.strip()
    units = {"gbps": 1e9, "mbps": 1e6, "kbps": 1e3, "bps": 1.0}
    low = s.lower()
    for u, m in units.items():
        if low.endswith(u):
            return float(low[: -len(u)]) * m
    return float(s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="a", choices=sorted(SCENARIOS), help="preset matching aqmlab's bench scenario; other flags override it")
    ap.add_argument("--flows", type=int)
    ap.add_argument("--rate", help="bottleneck rate, e.g. 1Gbps, 10Gbps")
    ap.add_argument("--rtt-ms", type=float, help="base two-way propagation delay (ms)")
    ap.add_argument("--duration", type=float, help="simulated seconds")
    ap.add_argument("--buffer-bytes", type=int, help="bottleneck queue-disc limit in bytes")
    ap.add_argument("--k-bytes", type=int, help="step-marking threshold for aqm red-step")
    ap.add_argument("--aqm", choices=["fifo", "red-step"])
    ap.add_argument("--cc", choices=sorted(CC_TYPES))
    ap.add_argument("--access-rate", default="100Gbps")
    ap.add_argument("--sock-buf", type=int, default=8 * 1024 * 1024, help="SndBufSize and RcvBufSize per socket (bytes)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    p = dict(SCENARIOS[args.scenario])
    for key in ("flows", "rate", "rtt_ms", "duration", "buffer_bytes", "k_bytes", "aqm", "cc"):
        v = getattr(args, key)
        if v is not None:
            p[key] = v
    if p["aqm"] == "red-step" and not p["k_bytes"]:
        ap.error("--aqm red-step needs --k-bytes")

    from ns import ns  # slow import (cppyy JIT); not timed

    rate_bps = parse_rate(p["rate"])
    one_way = p["rtt_ms"] / 2.0

    ns.RngSeedManager.SetSeed(args.seed)
    ns.RngSeedManager.SetRun(1)

    cfg = ns.Config.SetDefault
    cfg("ns3::TcpL4Protocol::SocketType", ns.StringValue(CC_TYPES[p["cc"]]))
    cfg("ns3::TcpL4Protocol::RecoveryType", ns.StringValue("ns3::TcpPrrRecovery"))
    cfg("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    cfg("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    cfg("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    cfg("ns3::TcpSocket::SndBufSize", ns.UintegerValue(args.sock_buf))
    cfg("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(args.sock_buf))
    cfg("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    cfg("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    cfg("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(200)))
    if p["cc"] == "dctcp":
        # TcpDctcp::Init turns ECN on for its own sockets; set it for the SYN path too.
        cfg("ns3::TcpSocketBase::UseEcn", ns.StringValue("On"))
    # Queue discs (configured through defaults: the variadic helper setters are awkward
    # from cppyy).
    cfg("ns3::FifoQueueDisc::MaxSize", ns.QueueSizeValue(ns.QueueSize(f"{p['buffer_bytes']}B")))
    if p["aqm"] == "red-step":
        k = float(p["k_bytes"])
        cfg("ns3::RedQueueDisc::MaxSize", ns.QueueSizeValue(ns.QueueSize(f"{p['buffer_bytes']}B")))
        cfg("ns3::RedQueueDisc::MinTh", ns.DoubleValue(k))
        cfg("ns3::RedQueueDisc::MaxTh", ns.DoubleValue(k))
        cfg("ns3::RedQueueDisc::QW", ns.DoubleValue(1.0))
        cfg("ns3::RedQueueDisc::Gentle", ns.BooleanValue(False))
        cfg("ns3::RedQueueDisc::UseEcn", ns.BooleanValue(True))
        cfg("ns3::RedQueueDisc::UseHardDrop", ns.BooleanValue(False))
        cfg("ns3::RedQueueDisc::MeanPktSize", ns.UintegerValue(1500))
        cfg("ns3::RedQueueDisc::LinkBandwidth", ns.DataRateValue(ns.DataRate(p["rate"])))
        cfg("ns3::RedQueueDisc::LinkDelay", ns.TimeValue(ns.MilliSeconds(one_way)))

    n = p["flows"]
    senders = ns.NodeContainer()
    senders.Create(n)
    receivers = ns.NodeContainer()
    receivers.Create(n)
    routers = ns.NodeContainer()
    routers.Create(2)
    r1, r2 = routers.Get(0), routers.Get(1)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue(args.access_rate))
    access.SetChannelAttribute("Delay", ns.StringValue("0ms"))

    bott = ns.PointToPointHelper()
    bott.SetDeviceAttribute("DataRate", ns.StringValue(p["rate"]))
    bott.SetChannelAttribute("Delay", ns.TimeValue(ns.MicroSeconds(one_way * 1000.0)))
    bott.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue("1p"))

    stack = ns.InternetStackHelper()
    stack.InstallAll()

    bdev = bott.Install(r1, r2)
    tch = ns.TrafficControlHelper()
    tch.SetRootQueueDisc("ns3::FifoQueueDisc" if p["aqm"] == "fifo" else "ns3::RedQueueDisc")
    qdiscs = tch.Install(bdev.Get(0))  # R1 -> R2 direction only
    qdisc = qdiscs.Get(0)

    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    addr.Assign(bdev)
    addr.NewNetwork()

    other_devs = [bdev.Get(1)]
    recv_ifaces = []
    for i in range(n):
        d = access.Install(senders.Get(i), r1)
        addr.Assign(d)
        addr.NewNetwork()
        other_devs += [d.Get(0), d.Get(1)]
        d = access.Install(r2, receivers.Get(i))
        ifc = addr.Assign(d)
        addr.NewNetwork()
        other_devs += [d.Get(0), d.Get(1)]
        recv_ifaces.append(ifc.GetAddress(1))
    # Ipv4AddressHelper::Assign installs ns-3's default FqCoDel on every device without a
    # queue disc; remove it so the bottleneck FIFO/RED is the only queue discipline.
    unt = ns.TrafficControlHelper()
    for d in other_devs:
        unt.Uninstall(d)

    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    rng = random.Random(args.seed)
    port = 5000
    apps = []
    for i in range(n):
        start = rng.uniform(0.0, 1.0)
        dst = ns.InetSocketAddress(recv_ifaces[i], port).ConvertTo()
        bulk = ns.BulkSendHelper("ns3::TcpSocketFactory", dst)
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(64 * 1448))
        a = bulk.Install(senders.Get(i))
        a.Start(ns.Seconds(start))
        a.Stop(ns.Seconds(p["duration"]))
        sink = ns.PacketSinkHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        s = sink.Install(receivers.Get(i))
        s.Start(ns.Seconds(0.0))
        s.Stop(ns.Seconds(p["duration"]))
        apps.append((a, s))

    ns.Simulator.Stop(ns.Seconds(p["duration"]))
    ev0 = ns.Simulator.GetEventCount()
    t0 = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0
    events = ns.Simulator.GetEventCount() - ev0

    st = qdisc.GetStats()
    pkts = int(st.nTotalSentPackets)
    byts = int(st.nTotalSentBytes)
    drops = int(st.nTotalDroppedPackets)
    marks = int(st.nTotalMarkedPackets)
    util = byts * 8.0 / (rate_bps * p["duration"])
    ns.Simulator.Destroy()

    name = args.scenario
    print(
        f"peer=ns3 scenario={name} flows={n} rate={p['rate']} rtt_ms={p['rtt_ms']:g} cc={p['cc']} "
        f"aqm={p['aqm']} buffer_bytes={p['buffer_bytes']} duration_s={p['duration']:g} "
        f"wall_s={wall:.3f} bottleneck_pkts={pkts} pkts_per_s={pkts / wall:.0f} "
        f"events_per_s={events / wall:.0f} utilization={util:.4f} drops={drops} marks={marks}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
