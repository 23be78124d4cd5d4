"""The emulator's results, computed by the simulator's own code: the router's report and what
the senders and the receiver measured (``_emulate``, ``_traffic``) go to
``engine.tables_from_records`` (crates/results: the simulator's metrics and table builders),
whose summary and tables this module wraps as a `Result`, with the raw TCP_INFO samples beside.
Only I/O here: no metric is computed in Python."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from aqmlab import engine
from aqmlab.scenario import Scenario
from aqmlab.simulate.run import VERSION, json_safe
from aqmlab.store.atomic import write_parquet
from aqmlab.store.result import Result, frames_from_native

__all__ = ["assemble", "save_extra", "PORT"]

#: The receiver's port (iperf3's default); the router's flows are
#: joined with the senders' sockets by it.
PORT = 5201
#: The receiver's address, and class i's senders' (the router ⇄ orchestrator contract,
#: docs/emulator.md §Topology).
RECEIVER_ADDR = "10.77.200.2"


def sender_addr(i: int) -> str:
    return f"10.77.{i + 1}.2"


def assemble(s: Scenario, config: dict[str, Any], raw: dict[str, Any], *, wall_time_s: float) -> Result:
    """The simulator's summary and tables (docs/model.md §Metrics, docs/scenario.md §Results)
    from the router's, the receiver's and the senders' measurements."""
    records = {
        "config": config,
        "router": raw["router"],
        "receiver": raw["receiver"],
        "senders": raw["senders"],
        "sources": [sender_addr(i) for i in range(len(raw["senders"]))],
        "receiver_addr": RECEIVER_ADDR,
        "port": PORT,
        "class_ports": raw.get("class_ports") or [],
    }
    out = engine.tables_from_records(json.dumps(records))
    summary = {
        "aqmlab_version": VERSION,
        "backend": "emu",
        "seed": s.seed,
        "wall_time_s": wall_time_s,
        "scenario": s.canonical(),
        "scenario_hash": s.hash(),
        "metrics": json_safe(out["metrics"]),
        "classes": json_safe(out["classes"]),
        "fct": json_safe(out["fct"]),
        "counters": json_safe(out["counters"]),
        "emu": {
            "kernel": os.uname().release,
            "pinning": raw.get("pinning"),
            "router_cpu_s": raw.get("router_cpu_s"),
            "offloads": raw.get("offloads"),
            "steal_ms": raw.get("steal_ms"),
            "t0_monotonic_ns": raw.get("t0_monotonic_ns"),
            "stalls": raw.get("stalls"),
        },
    }
    res = Result(summary, frames_from_native(out["tables"]))
    res.extra = {"tcp_info": _tcpinfo_table(raw, [c["name"] for c in config["classes"]])}  # type: ignore[attr-defined]
    return res


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

    extra = getattr(res, "extra", None) or {}
    for name, table in extra.items():
        write_parquet(target / f"{name}.parquet", table)
