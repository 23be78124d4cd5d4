"""The emulator's results: the simulator's summary and tables (crates/sim/src/results.rs,
DESIGN.md §Metrics, §Results store) assembled from what the router, the receiver and the
senders measured (``_emulate``, ``_traffic``). Pure computation on their JSON outputs."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from ._results import Result
from ._run import VERSION, _json_safe
from ._scenario import Scenario

__all__ = ["assemble", "save_extra", "SCHEMAS", "NULL_COLUMNS", "SojournHist", "fair_shares", "fct_by_size", "jain"]

#: The receiver's port (iperf3's default, as the seeds' tool used); the router's flows are
#: joined with the senders' sockets by it.
PORT = 5201
#: Drop and mark reasons in the simulator's column order (crates/sim/src/measure.rs
#: DROP_REASONS / MARK_REASONS; the router names them the same way).
DROP_REASONS = ("overflow", "early", "forced", "head", "flow_match", "value", "overload", "random")
MARK_REASONS = ("prob", "forced", "step", "coupled", "ctv", "random", "delay")


_U, _F, _S, _B = pa.int64(), pa.float64(), pa.string(), pa.bool_()

#: Column types exactly as the simulator's tables reach Parquet (`frames_from_native` builds
#: them from Python lists: integers as int64, floats and optional floats as double).
SCHEMAS: dict[str, list[tuple[str, pa.DataType]]] = {
    "flows": [
        ("flow", _U), ("class", _S), ("cc", _S), ("rtt_ms", _F), ("start_s", _F), ("stop_s", _F), ("fair_share_bps", _F), ("goodput_bps", _F),
        ("delivered_bytes", _U), ("arrived_bytes", _U), ("dropped_bytes", _U), ("marked_bytes", _U),
        ("mark_ratio", _F), ("drop_ratio", _F),
        *((f"drops_{r}", _U) for r in DROP_REASONS), *((f"marks_{r}", _U) for r in MARK_REASONS),
        ("segs_sent", _U), ("wire_bytes_sent", _U), ("retrans_segs", _U), ("rto_count", _U), ("tlp_count", _U),
        ("recoveries", _U), ("cwr_count", _U), ("segs_received", _U), ("total_dropped_pkts", _U),
        ("total_marked_pkts", _U), ("end_in_network_pkts", _U), ("fct_s", _F),
    ],
    "classes": [
        ("class", _S), ("cc", _S), ("rtt_ms", _F), ("count", _U), ("goodput_bps", _F), ("rel_throughput", _F),
        ("jain", _F), ("mark_ratio", _F), ("drop_ratio", _F), ("sojourn_mean_ms", _F),
    ],
    "timeseries": [
        ("t_s", _F), ("flow", _U), ("class", _S), ("throughput_bps", _F), ("cwnd", _U), ("ssthresh", _U),
        ("inflight", _U), ("srtt_ms", _F), ("pacing_rate_bps", _F), ("ca_state", _S), ("cc_phase", _S),
        ("cc_bw_bps", _F), ("inflight_hi", _F), ("cc_alpha", _F),
    ],
    "queue": [
        ("t_s", _F), ("qlen_pkts", _U), ("backlog_bytes", _U), ("sojourn_mean_ms", _F), ("sojourn_max_ms", _F),
        ("utilization", _F), ("drops", _U), ("marks", _U),
    ],
    "sojourn_hist": [("bin_lo_ms", _F), ("bin_hi_ms", _F), ("count", _U), ("fraction", _F)],
    "fct": [("flow", _U), ("class", _S), ("size_bytes", _U), ("start_s", _F), ("fct_s", _F), ("slowdown", _F), ("completed", _B)],
}

#: Columns the emulator cannot know (null in its tables; docs/emulator.md §Results lists them
#: with the reason): the kernel reports no TLP, recovery-episode or CWR counts, nor wire bytes
#: per flow; whole-run router totals and the packets left in flight are not measured; the
#: kernel's CCs expose no internal phase / bandwidth / inflight_hi / alpha through TCP_INFO.
NULL_COLUMNS = {
    "flows": ("wire_bytes_sent", "tlp_count", "recoveries", "cwr_count", "total_dropped_pkts", "total_marked_pkts", "end_in_network_pkts"),
    "timeseries": ("cc_phase", "cc_bw_bps", "inflight_hi", "cc_alpha"),
}


def _table(name: str, cols: dict[str, list[Any]]) -> pa.Table:
    schema = SCHEMAS[name]
    n = max((len(v) for v in cols.values()), default=0)
    arrays = [pa.array(cols.get(c, [None] * n), type=t) for c, t in schema]
    return pa.Table.from_arrays(arrays, names=[c for c, _ in schema])


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def jain(xs: list[float]) -> float | None:
    """Jain's index (Σx)² / (n·Σx²) (DESIGN.md §Metrics), None for no flows or all zero."""
    s2 = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * s2) if xs and s2 > 0 else None


class SojournHist:
    """The router's sparse 1 µs sojourn histogram with the simulator's statistics
    (crates/sim/src/measure.rs QueueMeasure: nearest-rank quantiles reported as the bin
    midpoint, never above the maximum)."""

    def __init__(self, bin_ns: int, bins: list[list[int]], max_ns: int | None):
        self.bin_ns = bin_ns
        self.bins = sorted((int(i), int(c)) for i, c in bins if c > 0)
        self.count = sum(c for _, c in self.bins)
        # The router reports the maximum exactly when it has it; otherwise the top of the
        # highest non-empty bin bounds it (±1 bin).
        if max_ns is not None:
            self.max_ns = max_ns
        elif self.bins:
            self.max_ns = (self.bins[-1][0] + 1) * bin_ns - 1
        else:
            self.max_ns = 0

    def quantile_ns(self, q: float) -> float | None:
        if self.count == 0:
            return None
        rank = min(max(math.ceil(q * self.count), 1), self.count)
        cum = 0
        for i, c in self.bins:
            cum += c
            if cum >= rank:
                return min(i * self.bin_ns + self.bin_ns / 2, float(self.max_ns))
        return float(self.max_ns)

    def rebinned(self, bin_ns: int) -> list[tuple[int, int]]:
        """(lower edge ns, count) from 0 to the bin holding the maximum, empty bins included."""
        if self.count == 0:
            return []
        n = self.max_ns // bin_ns + 1
        out = [0] * n
        for i, c in self.bins:
            out[min((i * self.bin_ns) // bin_ns, n - 1)] += c
        return [(k * bin_ns, c) for k, c in enumerate(out)]


def fair_shares(spans: list[tuple[int, int | None]], window: tuple[int, int], c_bps: float) -> list[float]:
    """Each flow's fair share, bit/s averaged over the window, from its (start, stop) schedule:
    wherever N flows are active each is due C/N (crates/sim/src/results.rs `fair_shares`;
    a finite flow counts as active from its start on)."""
    lo, hi = window
    span = [(min(max(a, lo), hi), min(max(b if b is not None else hi, lo), hi)) for a, b in spans]
    edges = sorted({t for ab in span for t in ab})
    share = [0.0] * len(spans)
    for t0, t1 in zip(edges, edges[1:]):
        active = [f for f, (a, b) in enumerate(span) if a <= t0 and t1 <= b]
        for f in active:
            share[f] += c_bps / len(active) * ((t1 - t0) / (hi - lo))
    return share


def _fct_label(b: int) -> str:
    if b >= 1_000_000 and b % 1_000_000 == 0:
        return f"{b // 1_000_000}MB"
    if b % 1000 == 0:
        return f"{b // 1000}KB"
    return f"{b}B"


def fct_by_size(rows: list[dict[str, Any]], edges: list[int]) -> list[dict[str, Any]]:
    """Completion times by size bin, as crates/sim/src/results.rs `fct_by_size` (same bin
    names, nearest-rank quantiles over the completed flows; unfinished ones counted)."""
    out = []
    for k in range(len(edges) + 1):
        lo = 0 if k == 0 else edges[k - 1]
        hi = edges[k] if k < len(edges) else None
        name = f"<{_fct_label(hi)}" if k == 0 and hi is not None else f"{_fct_label(lo)}–{_fct_label(hi)}" if hi is not None else f"≥{_fct_label(lo)}"
        in_bin = [r for r in rows if r["size_bytes"] >= lo and (hi is None or r["size_bytes"] < hi)]
        done = [r for r in in_bin if r["fct_s"] is not None]

        def stats(v: list[float]) -> dict[str, float | None]:
            if not v:
                return {"mean": None, "p50": None, "p99": None}
            v = sorted(v)
            q = lambda p: v[min(max(math.ceil(p * len(v)), 1), len(v)) - 1]  # noqa: E731
            return {"mean": sum(v) / len(v), "p50": q(0.5), "p99": q(0.99)}

        out.append(
            {
                "bin": name, "lo_bytes": lo, "hi_bytes": hi, "flows": len(in_bin), "completed": len(done),
                "unfinished": len(in_bin) - len(done), "fct_s": stats([r["fct_s"] for r in done]), "slowdown": stats([r["slowdown"] for r in done]),
            }
        )
    return out


def assemble(s: Scenario, config: dict[str, Any], raw: dict[str, Any], *, wall_time_s: float) -> Result:
    """The simulator's summary and tables (DESIGN.md §Metrics, §Results store) from the
    router's, the receiver's and the senders' measurements."""
    rt = raw["router"]
    c_bps = float(config["bottleneck"]["rate_bps"])
    warmup_ns, duration_ns = config["warmup_ns"], config["duration_ns"]
    window_s = (duration_ns - warmup_ns) / 1e9
    iv_ns = config["measure"]["interval_ns"]
    names = [c["name"] for c in config["classes"]]
    is_workload = [c.get("workload") is not None for c in config["classes"]]
    # Flows are joined by protocol (TCP 6, a CBR flow's UDP 17), source address and port: the
    # kernel's TCP and UDP port spaces are separate, so one port may name a flow of each.
    by_port: dict[tuple[int, str, int], dict[str, Any]] = {}
    port_reuse = 0
    for c in raw["receiver"]["conns"]:
        key = (c.get("proto", 6), c["src"], c["sport"])
        port_reuse += key in by_port
        by_port[key] = c
    router_flows = {(f["proto"], f["src"], f["sport"], f["dst"], f["dport"]): f for f in rt.get("flows", []) if f.get("proto") in (6, 17)}

    flows: list[dict[str, Any]] = []
    for i, snd in enumerate(raw["senders"]):
        src = f"10.77.{i + 1}.2"
        for f in snd["flows"]:
            proto = 17 if f.get("cc") == "cbr" else 6
            conn = by_port.get((proto, src, f["sport"])) if f["sport"] is not None else None
            rf = router_flows.pop((proto, src, f["sport"], "10.77.200.2", PORT), None) if f["sport"] is not None else None
            flows.append({"class": i, "snd": f, "conn": conn, "router": rf, "proto": proto})
    flows.sort(key=lambda x: x["snd"]["flow"])
    unmatched_router_flows = len(router_flows)

    n = len(flows)
    # Relative throughput and Jain's index compare each flow with its fair share (the
    # simulator's definition: x_i = goodput_i / share_i; C/N when all run the whole window).
    # As crates/sim/src/results.rs: only scheduled flows have a share — a workload's short
    # flows come and go, their yardstick is the completion time (share 0, left out).
    sched_idx = [k for k, f in enumerate(flows) if not is_workload[f["class"]]]
    sched_fair = fair_shares([(flows[k]["snd"]["start_ns"], flows[k]["snd"].get("stop_ns")) for k in sched_idx], (warmup_ns, duration_ns), c_bps)
    fair = [0.0] * n
    for k, share in zip(sched_idx, sched_fair):
        fair[k] = share
    col: dict[str, list[Any]] = {c: [] for c, _ in SCHEMAS["flows"]}
    goodput = []
    fct_rows = []
    for fl in flows:
        snd, conn, rf = fl["snd"], fl["conn"], fl["router"] or {}
        cls = config["classes"][fl["class"]]
        delivered = conn["window_bytes"] if conn else 0
        g = delivered * 8 / window_s
        goodput.append(g)
        arrived, dropped, marked = rf.get("arrived_bytes", 0), rf.get("dropped_bytes", 0), rf.get("marked_bytes", 0)
        info = snd.get("final_info") or {}
        rinfo = (conn or {}).get("final_info") or {}
        cbr = fl["proto"] == 17
        # FCT: the last payload byte's arrival at the receiver, from the connection's
        # establishment (the sender's connect completing, `connected_ns`): the simulator's
        # connection starts established at the flow's start (docs/model.md), so neither
        # backend counts the handshake — here the SYN's base RTT and its wait in the queue.
        # With the whole base RTT on the forward path the ACK of the last byte reaches the
        # sender at once, which is when the simulator's finite flow finishes (its last ACK).
        fct = None
        est = snd.get("connected_ns")
        last = (conn or {}).get("last_byte_ns")
        if cbr:
            # The simulator's CBR flow finishes when its sender does (sender.rs transmit_cbr /
            # stop_writing): at its last datagram's send, or at its stop; delivery is not waited
            # for. UDP has no handshake: from the planned start.
            if snd.get("finished_ns") is not None:
                fct = (snd["finished_ns"] - snd["start_ns"]) / 1e9
        elif est is not None and last is not None and snd["size_bytes"] is not None and conn["bytes"] >= snd["size_bytes"]:
            fct = (last - est) / 1e9
        elif est is not None and last is not None and snd.get("finished_writing_ns") is not None and conn["bytes"] >= snd["written_bytes"]:
            # A stopped flow is done when all it wrote is delivered (the simulator: its last
            # data acknowledged after the stop).
            fct = (last - est) / 1e9
        vals = {
            "flow": snd["flow"], "class": names[fl["class"]], "cc": "cbr" if cbr else cls["cc"]["name"], "rtt_ms": cls["rtt_ns"] / 1e6,
            "start_s": snd["start_ns"] / 1e9, "stop_s": None if snd.get("stop_ns") is None else snd["stop_ns"] / 1e9,
            "fair_share_bps": fair[len(goodput) - 1], "goodput_bps": g, "delivered_bytes": delivered,
            "arrived_bytes": arrived, "dropped_bytes": dropped, "marked_bytes": marked,
            "mark_ratio": _ratio(marked, arrived), "drop_ratio": _ratio(dropped, arrived),
            **{f"drops_{r}": (rf.get("drops") or {}).get(r, 0) for r in DROP_REASONS},
            **{f"marks_{r}": (rf.get("marks") or {}).get(r, 0) for r in MARK_REASONS},
            "segs_sent": info.get("data_segs_out"), "retrans_segs": info.get("total_retrans"),
            "rto_count": info.get("total_rto"), "segs_received": rinfo.get("data_segs_in"), "fct_s": fct,
        }
        if cbr:
            # Datagrams are counted exactly at both ends: sent, and their wire size (payload +
            # 28 B of UDP/IP headers, as the simulator's); UDP retransmits nothing.
            dg = snd.get("datagrams_sent", 0)
            vals.update({
                "segs_sent": dg, "wire_bytes_sent": snd.get("payload_sent", 0) + 28 * dg, "retrans_segs": 0, "rto_count": 0,
                "tlp_count": 0, "recoveries": 0, "cwr_count": 0, "segs_received": (conn or {}).get("datagrams", 0),
            })
        for k in col:
            col[k].append(vals.get(k))
        if snd["size_bytes"] is not None:
            ideal = snd["size_bytes"] * 8 / c_bps + cls["rtt_ns"] / 1e9
            fct_rows.append({"flow": snd["flow"], "class": names[fl["class"]], "size_bytes": snd["size_bytes"], "start_s": snd["start_ns"] / 1e9, "fct_s": fct, "slowdown": None if fct is None else fct / ideal, "completed": fct is not None})
    tables = {"flows": _table("flows", col)}

    # Classes.
    normalized = [goodput[k] / fair[k] if fair[k] > 0 else None for k in range(n)]
    classes_json = []
    kc: dict[str, list[Any]] = {c: [] for c, _ in SCHEMAS["classes"]}
    class_soj = rt.get("class_sojourn") or []
    for c, cls in enumerate(config["classes"]):
        idx = [k for k in range(n) if flows[k]["class"] == c]
        g = [goodput[k] for k in idx]
        total = sum(g)
        mean = total / len(g) if g else 0.0
        shared = [k for k in idx if fair[k] > 0]
        # No share, no relative throughput or Jain's index for a workload class (results.rs).
        rel = sum(goodput[k] for k in shared) / sum(fair[k] for k in shared) if shared and not is_workload[c] else None
        arrived = sum((flows[k]["router"] or {}).get("arrived_bytes", 0) for k in idx)
        marked = sum((flows[k]["router"] or {}).get("marked_bytes", 0) for k in idx)
        dropped = sum((flows[k]["router"] or {}).get("dropped_bytes", 0) for k in idx)
        cs = class_soj[c] if c < len(class_soj) else {"sum_ns": 0, "count": 0}
        soj = cs["sum_ns"] / cs["count"] / 1e6 if cs.get("count") else None
        row = {
            "name": names[c], "cc": "cbr" if cls.get("cc") is None else cls["cc"]["name"], "rtt_ms": cls["rtt_ns"] / 1e6, "count": len(idx),
            "goodput_bps": total, "mean_goodput_bps": mean, "rel_throughput": rel,
            "jain": None if is_workload[c] else jain([normalized[k] for k in shared]),
            "mark_ratio": _ratio(marked, arrived), "drop_ratio": _ratio(dropped, arrived), "sojourn_mean_ms": soj,
        }
        classes_json.append(row)
        for k, v in {"class": names[c], "cc": row["cc"], "rtt_ms": row["rtt_ms"], "count": row["count"], "goodput_bps": total, "rel_throughput": row["rel_throughput"], "jain": row["jain"], "mark_ratio": row["mark_ratio"], "drop_ratio": row["drop_ratio"], "sojourn_mean_ms": soj}.items():
            kc[k].append(v)
    tables["classes"] = _table("classes", kc)

    # Overall.
    arrived = sum((f["router"] or {}).get("arrived_bytes", 0) for f in flows)
    marked = sum((f["router"] or {}).get("marked_bytes", 0) for f in flows)
    dropped = sum((f["router"] or {}).get("dropped_bytes", 0) for f in flows)
    sh = rt.get("sojourn_hist") or {"bin_ns": 1000, "bins": []}
    hist = SojournHist(sh.get("bin_ns", 1000), sh.get("bins", []), sh.get("max_ns"))
    soj_sum = sum(c.get("sum_ns", 0) for c in class_soj)
    soj_n = sum(c.get("count", 0) for c in class_soj)
    mean_ns = soj_sum / soj_n if soj_n else None
    target = config["bottleneck"].get("delay_target_ns")
    metrics = {
        "utilization": rt["link_bytes"] * 8 / (c_bps * window_s),
        "jain": jain([x for x in normalized if x is not None]),
        "goodput_bps": sum(goodput),
        "sojourn_ms": {
            "mean": None if mean_ns is None else mean_ns / 1e6,
            "p50": None if hist.quantile_ns(0.5) is None else hist.quantile_ns(0.5) / 1e6,
            "p99": None if hist.quantile_ns(0.99) is None else hist.quantile_ns(0.99) / 1e6,
            "max": hist.max_ns / 1e6 if hist.count else None,
        },
        "sojourn_mean_rel_target": mean_ns / target if mean_ns is not None and target else None,
        "sojourn_max_rel_target": hist.max_ns / target if target and hist.count else None,
        "mark_ratio": _ratio(marked, arrived),
        "drop_ratio": _ratio(dropped, arrived),
        "flows": n,
        "window_s": window_s,
    }

    # Time series: receiver byte counts per tick (throughput), sender TCP_INFO (the rest).
    tick_bytes: dict[tuple[int, int, str, int], int] = {}
    for t in raw["receiver"]["ticks"]:
        for proto, src, sport, b in t["bytes"]:
            tick_bytes[(t["k"], proto, src, sport)] = b
    sport_of = {f["snd"]["flow"]: (f["proto"], f"10.77.{f['class'] + 1}.2", f["snd"]["sport"]) for f in flows}
    cls_of = {f["snd"]["flow"]: f["class"] for f in flows}
    ts: dict[str, list[Any]] = {c: [] for c, _ in SCHEMAS["timeseries"]}
    samples = sorted((x for snd in raw["senders"] for x in snd["samples"]), key=lambda x: (x["k"], x["flow"]))
    for x in samples:
        proto, src, sport = sport_of[x["flow"]]
        now_b = tick_bytes.get((x["k"], proto, src, sport))
        prev_b = tick_bytes.get((x["k"] - 1, proto, src, sport), 0)
        inflight = None
        if x.get("unacked") is not None:
            # tcp_packets_in_flight() (include/net/tcp.h): unacked − (sacked + lost) + retrans.
            inflight = max(0, x["unacked"] - (x["sacked"] + x["lost"]) + x["retrans"])
        row = {
            "t_s": x["k"] * iv_ns / 1e9, "flow": x["flow"], "class": names[cls_of[x["flow"]]],
            "throughput_bps": None if now_b is None else (now_b - prev_b) * 8 / (iv_ns / 1e9),
            "cwnd": x.get("snd_cwnd"), "ssthresh": x.get("snd_ssthresh"), "inflight": inflight,
            "srtt_ms": None if x.get("rtt") is None else x["rtt"] / 1e3,
            "pacing_rate_bps": None if x.get("pacing_rate") is None else x["pacing_rate"] * 8.0,
            "ca_state": {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}.get(x.get("ca_state"), None),
        }
        for k in ts:
            ts[k].append(row.get(k))
    tables["timeseries"] = _table("timeseries", ts)

    q: dict[str, list[Any]] = {c: [] for c, _ in SCHEMAS["queue"]}
    for r in rt.get("queue", []):
        vals = {
            "t_s": r["t_ns"] / 1e9, "qlen_pkts": r["qlen_pkts"], "backlog_bytes": r["backlog_bytes"],
            "sojourn_mean_ms": None if r.get("sojourn_mean_ns") is None else r["sojourn_mean_ns"] / 1e6,
            "sojourn_max_ms": None if r.get("sojourn_max_ns") is None else r["sojourn_max_ns"] / 1e6,
            "utilization": r["link_bytes"] * 8 / (c_bps * iv_ns / 1e9), "drops": r["drops"], "marks": r["marks"],
        }
        for k in q:
            q[k].append(vals[k])
    tables["queue"] = _table("queue", q)

    hb = config["measure"]["hist_bin_ns"]
    bins = hist.rebinned(hb)
    tables["sojourn_hist"] = _table(
        "sojourn_hist",
        {"bin_lo_ms": [lo / 1e6 for lo, _ in bins], "bin_hi_ms": [lo / 1e6 + hb / 1e6 for lo, _ in bins], "count": [c for _, c in bins], "fraction": [c / max(1, hist.count) for _, c in bins]},
    )
    tables["fct"] = _table("fct", {k: [r[k] for r in fct_rows] for k in ("flow", "class", "size_bytes", "start_s", "fct_s", "slowdown", "completed")})

    counters = dict(rt.get("counters") or {})
    counters.update(
        {
            "finite_flows": len(fct_rows),
            "unfinished_flows": sum(1 for r in fct_rows if not r["completed"]),
            "router_complete": rt.get("complete"),
            "router_unmatched_flows": unmatched_router_flows,
            "flows_without_connection": sum(1 for f in flows if f["snd"]["sport"] is None),
            "flow_errors": [f"flow {f['snd']['flow']}: {f['snd']['error']}" for f in flows if f["snd"].get("error")],
            "tcp_reord_seen": sum(((f["snd"].get("final_info") or {}).get("reord_seen") or 0) for f in flows),
            "rcv_ooopack": sum((((f["conn"] or {}).get("final_info") or {}).get("rcv_ooopack") or 0) for f in flows),
            # Datagrams of CBR flows received after one with a higher sequence number (must be
            # 0: the router never reorders a flow), refused by the sender's kernel, or found a
            # full socket buffer (sent 100 µs later).
            "cbr_out_of_order": sum(((f["conn"] or {}).get("out_of_order") or 0) for f in flows if f["proto"] == 17),
            "cbr_send_errors": sum((f["snd"].get("send_errors") or 0) for f in flows if f["proto"] == 17),
            "cbr_blocked": sum((f["snd"].get("blocked") or 0) for f in flows if f["proto"] == 17),
            "port_reuse": port_reuse,
            **start_lateness([f["snd"] for f in flows]),
        }
    )
    edges = config["measure"]["fct_bins_bytes"]
    summary = {
        "aqmlab_version": VERSION,
        "backend": "emu",
        "seed": s.seed,
        "wall_time_s": wall_time_s,
        "scenario": s.canonical(),
        "scenario_hash": s.hash(),
        "metrics": _json_safe(metrics),
        "classes": _json_safe(classes_json),
        "fct": _json_safe(fct_by_size(fct_rows, edges)),
        "counters": _json_safe(counters),
        "emu": {"kernel": os.uname().release, "pinning": raw.get("pinning"), "router_cpu_s": raw.get("router_cpu_s")},
    }
    res = Result(summary, tables)
    res.extra = {"tcp_info": _tcpinfo_table(raw, names)}  # type: ignore[attr-defined]
    return res


def start_lateness(snd_flows: list[dict[str, Any]]) -> dict[str, Any]:
    """How late the senders opened the flows: each flow's connect call (TCP; a CBR flow's
    first datagram goes at the same instant) behind its planned start, ns — median, p99
    (nearest rank) and maximum over the flows that started."""
    late = sorted(f["connect_ns"] - f["start_ns"] for f in snd_flows if f.get("connect_ns") is not None)
    if not late:
        return {"start_late_p50_ns": None, "start_late_p99_ns": None, "start_late_max_ns": None}
    q = lambda p: late[min(max(math.ceil(p * len(late)), 1), len(late)) - 1]  # noqa: E731
    return {"start_late_p50_ns": q(0.5), "start_late_p99_ns": q(0.99), "start_late_max_ns": late[-1]}


def _tcpinfo_table(raw: dict[str, Any], names: list[str]) -> pa.Table:
    """Every raw TCP_INFO sample (the fields the simulator's schema has no column for:
    delivery rate, retransmits, bytes acked, min RTT, CE deliveries, reordering); CBR flows
    have none."""
    rows = [dict(x, **{"class": names[i]}) for i, snd in enumerate(raw["senders"]) for x in snd["samples"] if not x.get("cbr")]
    if not rows:
        return pa.table({"t_s": pa.array([], pa.float64())})
    keys = [k for k in rows[0] if k not in ("k",)]
    cols = {"t_s": pa.array([r["t_ns"] / 1e9 for r in rows], pa.float64())}
    for k in keys:
        if k == "t_ns":
            continue
        cols[k] = pa.array([r.get(k) for r in rows], pa.string() if k == "class" else pa.int64())
    return pa.table(cols)


def save_extra(target: Path, res: Result) -> None:
    """The raw TCP_INFO samples beside the standard tables (tcp_info.parquet), atomically."""
    import pyarrow.parquet as pq

    extra = getattr(res, "extra", None) or {}
    for name, table in extra.items():
        tmp = target / f".{name}.parquet.tmp-{os.getpid()}"
        pq.write_table(table, tmp)
        os.replace(tmp, target / f"{name}.parquet")


