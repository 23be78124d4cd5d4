"""Lowering: a validated scenario → the engine config (all integers: ns, bit/s, bytes).

Conversions (docs/scenario.md): a time-sized buffer or threshold is bytes at line rate
(``time × C / 8``, as seeds 003/004 define buffers); ``bdp`` is ``rate × rtt_ref / 8`` bytes;
``K rtt`` is ``K × rtt_ref``; a size in ``pkt`` is that many packets where the engine counts
packets (buffers, TailDrop/STEP limits) and ``pkt × 1500`` bytes where it counts bytes (RED).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from . import _units as u

if TYPE_CHECKING:
    from ._scenario import Scenario

__all__ = ["lower", "check_with_engine"]


def _bytes(q: u.Quantity, rate_bps: int, rtt_ref_ns: int) -> int:
    if q.unit == "bytes":
        v = q.value
    elif q.unit == "packets":
        v = q.value * u.PACKET_BYTES
    elif q.unit == "ns":
        v = q.value * rate_bps / Fraction(8 * 10**9)
    elif q.unit == "bdp":
        v = q.value * rate_bps * rtt_ref_ns / Fraction(8 * 10**9)
    else:  # pragma: no cover - parse_size never yields other units
        raise ValueError(q.unit)
    return math.floor(v)


def _limit(text: str | None, rate: int, rtt_ref: int) -> tuple[int | None, int | None]:
    """(packets, bytes) for a buffer or FIFO limit."""
    if text is None:
        return None, None
    q = u.parse_size(text)
    if q.unit == "packets":
        return int(q.value), None
    return None, _bytes(q, rate, rtt_ref)


def _target_ns(text: str, rtt_ref: int) -> int:
    q = u.parse_target(text)
    return math.floor(q.value * rtt_ref) if q.unit == "rtt" else int(q.value)


def _schedule(text: str) -> dict[str, Any]:
    """A start or stop schedule (the engine's StartConfig)."""
    m = re.match(r"^(uniform|staggered)\((.+), (.+)\)$", text)
    if m:
        a, b = u.parse_time(m.group(2)), u.parse_time(m.group(3))
        if m.group(1) == "uniform":
            return {"kind": "uniform", "lo_ns": a, "hi_ns": b}
        return {"kind": "staggered", "first_ns": a, "spacing_ns": b}
    return {"kind": "fixed", "at_ns": u.parse_time(text)}


def lower(s: "Scenario") -> dict[str, Any]:
    b = s.bottleneck
    rate = u.parse_rate(b.rate)
    rtt_ref = s.rtt_ref_ns()
    buf_pkts, buf_bytes = _limit(b.buffer, rate, rtt_ref)
    aqm = b.aqm
    delay_target_ns: int | None = None
    if aqm.kind == "taildrop":
        lp, lb = _limit(aqm.limit, rate, rtt_ref)
        engine_aqm: dict[str, Any] = {"kind": "taildrop", "limit_packets": lp, "limit_bytes": lb}
    elif aqm.kind == "red":
        engine_aqm = {"kind": "red"}
        for key in ("limit", "min", "max", "avpkt"):
            v = getattr(aqm, key)
            if v is not None:
                engine_aqm[key] = _bytes(u.parse_size(v), rate, rtt_ref)
        if aqm.limit is None:
            # Default child limit: the physical buffer.
            engine_aqm["limit"] = buf_bytes if buf_bytes is not None else (buf_pkts or 0) * u.PACKET_BYTES
        if aqm.burst is not None:
            engine_aqm["burst"] = aqm.burst
        if aqm.probability is not None:
            engine_aqm["probability"] = aqm.probability
        if aqm.bandwidth is not None:
            engine_aqm["bandwidth"] = u.parse_rate(aqm.bandwidth)
        for flag in ("ecn", "harddrop", "nodrop", "adaptive", "gentle"):
            engine_aqm[flag] = getattr(aqm, flag)
    elif aqm.kind == "step":
        if aqm.target is not None:
            delay_target_ns = _target_ns(aqm.target, rtt_ref)
            # L_target = D_target · C (seed 003 §III).
            engine_aqm = {"kind": "step", "threshold_bytes": math.floor(Fraction(delay_target_ns) * rate / (8 * 10**9))}
        else:
            q = u.parse_size(aqm.threshold)
            if q.unit == "packets":
                engine_aqm = {"kind": "step", "threshold_packets": int(q.value)}
            else:
                engine_aqm = {"kind": "step", "threshold_bytes": _bytes(q, rate, rtt_ref)}
    elif aqm.kind == "pie":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        engine_aqm = {
            "kind": "pie",
            "target_ns": delay_target_ns,
            "tupdate_ns": u.parse_time(aqm.tupdate),
            "limit": int(u.parse_size(aqm.limit).value),
            "alpha": aqm.alpha,
            "beta": aqm.beta,
            "ecn": aqm.ecn,
            "bytemode": aqm.bytemode,
            "dq_rate_estimator": aqm.dq_rate_estimator,
        }
    elif aqm.kind == "fq_pie":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        limit = int(u.parse_size(aqm.limit).value)
        if buf_pkts is not None:
            limit = min(limit, buf_pkts)
        engine_aqm = {
            "kind": "fq_pie",
            "flows": aqm.flows,
            "limit": limit,
            "quantum": _bytes(u.parse_size(aqm.quantum), rate, rtt_ref),
            "ecn_prob": aqm.ecn_prob,
            "pie": {
                "target_ns": delay_target_ns,
                "tupdate_ns": u.parse_time(aqm.tupdate),
                "alpha": aqm.alpha,
                "beta": aqm.beta,
                "ecn": aqm.ecn,
                "bytemode": aqm.bytemode,
                "dq_rate_estimator": aqm.dq_rate_estimator,
            },
        }
    elif aqm.kind == "pi2":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        engine_aqm = {
            "kind": "pi2",
            "target_ns": delay_target_ns,
            "tupdate_ns": u.parse_time(aqm.tupdate),
            "alpha": aqm.alpha,
            "beta": aqm.beta,
            "k": aqm.k,
            "ecn_mask": aqm.ecn_mask,
            "limit": int(u.parse_size(aqm.limit).value),
        }
    elif aqm.kind == "dualpi2":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        engine_aqm = {
            "kind": "dualpi2",
            "target_ns": delay_target_ns,
            "tupdate_ns": u.parse_time(aqm.tupdate),
            "alpha": aqm.alpha,
            "beta": aqm.beta,
            "k": aqm.k,
            "step_ns": u.parse_time(aqm.step),
            "min_qlen_step": aqm.min_qlen_step,
            "wc": aqm.wc,
            "ecn_mask": aqm.ecn_mask,
            "limit": int(u.parse_size(aqm.limit).value),
        }
    elif aqm.kind == "codel":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        engine_aqm = {
            "kind": "codel",
            "target_ns": delay_target_ns,
            "interval_ns": u.parse_time(aqm.interval),
            "limit": int(u.parse_size(aqm.limit).value),
            "ecn": aqm.ecn,
            "ce_threshold_ns": u.parse_time(aqm.ce_threshold) if aqm.ce_threshold is not None else None,
        }
    elif aqm.kind == "fq_codel":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        limit = int(u.parse_size(aqm.limit).value)
        memory = _bytes(u.parse_size(aqm.memory_limit), rate, rtt_ref)
        # FQ-CoDel enforces its own limits (it drops from the fattest queue, not the arrival);
        # the physical buffer caps them.
        if buf_pkts is not None:
            limit = min(limit, buf_pkts)
        if buf_bytes is not None:
            memory = min(memory, buf_bytes)
        engine_aqm = {
            "kind": "fq_codel",
            "flows": aqm.flows,
            "quantum": _bytes(u.parse_size(aqm.quantum), rate, rtt_ref),
            "limit": limit,
            "memory_limit": memory,
            "drop_batch": aqm.drop_batch,
            "target_ns": delay_target_ns,
            "interval_ns": u.parse_time(aqm.interval),
            "ecn": aqm.ecn,
            "ce_threshold_ns": u.parse_time(aqm.ce_threshold) if aqm.ce_threshold is not None else None,
        }
    elif aqm.kind == "choke":
        engine_aqm = {"kind": "choke"}
        for key in ("limit", "min", "max"):
            v = getattr(aqm, key)
            if v is not None:
                engine_aqm[key] = int(u.parse_size(v).value)
        if aqm.limit is None:
            # Default: the physical buffer, in packets (1500-byte packets if given in bytes).
            engine_aqm["limit"] = buf_pkts if buf_pkts is not None else max(1, (buf_bytes or 0) // u.PACKET_BYTES)
        if aqm.burst is not None:
            engine_aqm["burst"] = aqm.burst
        if aqm.probability is not None:
            engine_aqm["probability"] = aqm.probability
        # tc choke requires a bandwidth; the natural one is the link's.
        engine_aqm["bandwidth"] = u.parse_rate(aqm.bandwidth) if aqm.bandwidth is not None else rate
        engine_aqm["ecn"] = aqm.ecn
        engine_aqm["harddrop"] = aqm.harddrop
    elif aqm.kind == "gsp":
        if aqm.target is not None:
            delay_target_ns = _target_ns(aqm.target, rtt_ref)
            # "Parameters derived from link capacity" (seed 004): θ = target · C.
            threshold = math.floor(Fraction(delay_target_ns) * rate / (8 * 10**9))
        else:
            threshold = _bytes(u.parse_size(aqm.threshold), rate, rtt_ref)
        interval = u.parse_time(aqm.interval)
        engine_aqm = {
            "kind": "gsp",
            "threshold_bytes": threshold,
            "interval_ns": interval,
            "tau_ns": u.parse_time(aqm.tau) if aqm.tau is not None else 5 * interval,
            "alpha": aqm.alpha,
            "max_time_ns": u.parse_time(aqm.max_time) if aqm.max_time is not None else None,
            "adaptive": aqm.adaptive,
            # GSP enforces the buffer itself so that its state machine sees overflows.
            "limit_packets": buf_pkts,
            "limit_bytes": buf_bytes,
        }
    elif aqm.kind == "ckcd":
        pkt = Fraction(u.PACKET_BYTES)
        bdp_pkts = Fraction(rate) * rtt_ref / (8 * 10**9) / pkt
        buf_in_pkts = Fraction(buf_pkts) if buf_pkts is not None else Fraction(buf_bytes or 0) / pkt

        def pkts(text: str | None, default: Fraction) -> float:
            if text is None:
                return float(default)
            q = u.parse_size(text)
            return float(q.value) if q.unit == "packets" else float(Fraction(_bytes(q, rate, rtt_ref)) / pkt)

        # Seed 001: q_min = BDP, q_max = 3·BDP; clamped to B/3 and B when the buffer is smaller
        # (aqm.md §11.2 item 6: otherwise the enqueue phase could never run).
        engine_aqm = {
            "kind": "ckcd",
            "rate_bps": rate,
            "packet_bytes": u.PACKET_BYTES,
            "q_min": pkts(aqm.q_min, min(bdp_pkts, buf_in_pkts / 3)),
            "q_max": pkts(aqm.q_max, min(3 * bdp_pkts, buf_in_pkts)),
            "omega": aqm.omega,
            "d_ns": u.parse_time(aqm.d),
            "delta_ns": u.parse_time(aqm.delta),
            # d_th is clamped to the buffer time.
            "d_max_ns": math.floor(buf_in_pkts * pkt * 8 * 10**9 / rate),
            "threshold": aqm.threshold,
            "k": aqm.k,
            "t_mu_ns": u.parse_time(aqm.t_mu),
            "flow_expiry_ns": u.parse_time(aqm.flow_expiry),
        }
        delay_target_ns = u.parse_time(aqm.d)
    elif aqm.kind == "ppv":
        # PPV owns its limit: it must see the overflowing arrival to choose the lowest-value
        # victim (aqm.md §9.3), so the physical buffer is handed to it.
        engine_aqm = {"kind": "ppv", "limit_packets": buf_pkts, "limit_bytes": buf_bytes}
    elif aqm.kind == "csaqm":
        delay_target_ns = _target_ns(aqm.target, rtt_ref)
        # L_target = D_target · C (seed 003 §III).
        engine_aqm = {
            "kind": "csaqm",
            "target_bytes": math.floor(Fraction(delay_target_ns) * rate / (8 * 10**9)),
            "interval_ns": u.parse_time(aqm.interval),
        }
    elif aqm.kind == "bernoulli":
        engine_aqm = {"kind": "bernoulli", "drop": aqm.drop, "mark": aqm.mark}
    else:  # pragma: no cover - the model refuses other kinds
        raise ValueError(aqm.kind)

    classes = []
    for f, name in zip(s.flows, s.class_names()):
        size_bytes = None
        if f.size is not None:
            q = u.parse_size(f.size, allow_time=False)
            size_bytes = int(q.value) * (u.PACKET_BYTES - 52) if q.unit == "packets" else int(q.value)
        cbr = f.cc == "cbr"
        cls: dict[str, Any] = {
            "name": name,
            "cc": None if cbr else {"name": f.cc, **f.cc_params},
            "cbr_rate_bps": u.parse_rate(f.rate) if cbr and f.rate is not None else None,
            "count": f.count,
            "rtt_ns": u.parse_time(f.rtt),
            "ecn": f.ecn,
            "start": _schedule(f.start),
            "size_bytes": size_bytes,
            "fq_pacing": f.fq_pacing,
        }
        if f.stop is not None:
            cls["stop"] = _schedule(f.stop)
        classes.append(cls)
    names = s.class_names()
    for w, name in zip(s.workload, names[len(s.flows):]):
        sd = w.size
        if sd.dist == "fixed":
            size: dict[str, Any] = {"dist": "fixed", "bytes": sd.bytes_of("size")}
        elif sd.dist == "uniform":
            size = {"dist": "uniform", "lo": sd.bytes_of("min"), "hi": sd.bytes_of("max")}
        elif sd.dist == "exponential":
            size = {"dist": "exponential", "mean": float(sd.bytes_of("mean"))}
        elif sd.dist == "pareto":
            size = {"dist": "pareto", "alpha": sd.alpha, "lo": sd.bytes_of("min"), "hi": sd.bytes_of("max")}
        elif sd.dist == "lognormal":
            size = {"dist": "lognormal", "mu": math.log(sd.bytes_of("median")), "sigma": sd.sigma}
        else:
            size = {"dist": "empirical", "points": [list(p) for p in sd.points or []]}
        rate_per_s = w.rate if w.rate is not None else w.load * rate / 8 / sd.mean_bytes()
        classes.append(
            {
                "name": name,
                "cc": {"name": w.cc, **w.cc_params},
                "cbr_rate_bps": None,
                "count": 0,
                "rtt_ns": u.parse_time(w.rtt),
                "ecn": w.ecn,
                "start": {"kind": "fixed", "at_ns": 0},
                "size_bytes": None,
                "fq_pacing": w.fq_pacing,
                "workload": {"rate_per_s": rate_per_s, "size": size, "start_ns": u.parse_time(w.start), "stop_ns": u.parse_time(w.stop) if w.stop else None},
            }
        )
    fct_bins = []
    for b in s.measure.fct_bins:
        q = u.parse_size(b, allow_time=False)
        fct_bins.append(int(q.value) * (u.PACKET_BYTES - 52) if q.unit == "packets" else int(q.value))
    marker = s.effective_marker()
    engine_marker: dict[str, Any] | None = None
    if marker is not None:
        names = s.class_names()
        engine_marker = {
            "rate_window_ns": u.parse_time(marker.rate_window),
            # Per class, in class order; unlisted classes weigh 1 (equal sharing: all 1).
            "class_weights": [marker.weights.get(n, 1.0) for n in names],
            # Custom TVFs as (bit/s, value) points per class; None = the default TVF.
            "class_curves": [
                [(float(u.parse_rate(x)), float(v)) for x, v in marker.curves[n]] if n in marker.curves else None for n in names
            ],
        }
    return {
        "name": s.name,
        "seed": s.seed,
        "duration_ns": u.parse_time(s.duration),
        "warmup_ns": u.parse_time(s.warmup),
        "bottleneck": {
            "rate_bps": rate,
            "buffer_packets": buf_pkts,
            "buffer_bytes": buf_bytes,
            "aqm": engine_aqm,
            "delay_target_ns": delay_target_ns,
        },
        "classes": classes,
        "marker": engine_marker,
        "measure": {"interval_ns": u.parse_time(s.measure.interval), "hist_bin_ns": u.parse_time(s.measure.hist_bin), "fct_bins_bytes": fct_bins},
    }


def check_with_engine(s: "Scenario", *, text: str | None = None, file: str | None = None) -> None:
    """Ask the engine to validate what only it knows; raise a located ScenarioError."""
    from . import _native
    from ._locate import locate
    from ._scenario import ScenarioError

    def fail(key: str, msg: str) -> None:
        line = locate(text, key) if text is not None else None
        raise ScenarioError(msg, file=file, line=line, key=key)

    for section, items in (("flows", s.flows), ("workload", s.workload)):
        for i, f in enumerate(items):
            if f.cc == "cbr":
                continue
            err = _native.check_cc(json.dumps({"name": f.cc, **f.cc_params}))
            if err:
                m = re.match(r"^unknown field `([^`]+)`(.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", f"unknown {f.cc} parameter{m.group(2)}")
                m = re.match(r"^([a-z_]+): (.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", m.group(2))
                fail(f"{section}[{i}].cc_params", err)
    try:
        _native.check(json.dumps(lower(s)))
    except ValueError as e:
        msg = str(e)
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_.\[\]]*): (.*)$", msg)
        if m:
            key, detail = m.group(1), m.group(2)
            # Engine option names are the scenario's (tc's) names.
            key = key.replace("threshold_bytes", "target").replace("threshold_packets", "threshold").replace("target_bytes", "target")
            # Engine classes are the flow classes, then the workloads.
            m2 = re.match(r"^flows\[(\d+)\](.*)$", key)
            if m2 and int(m2.group(1)) >= len(s.flows):
                key = f"workload[{int(m2.group(1)) - len(s.flows)}]{m2.group(2).replace('.workload', '')}"
            fail(key, detail)
        fail("bottleneck", msg)
