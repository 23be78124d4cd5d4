"""The fidelity suite: a fixed set of cases run on both backends, the simulator and the
emulator (real Linux TCP through the same disciplines), each metric scored against a stated
band (docs/fidelity.md).

A case is a scenario file in `python/aqmlab/fidelity/`, listed in its `manifest.toml`. The
emulator side is the mean over `emu_runs` runs (`EMU_RUNS` by default), run k at the scenario's
seed + k − 1; the simulator side, run after it, the mean over `SIM_SEEDS` seeds (the scenario's
seed and the next ones), so that both sides average over the same start-time draws, its hosts
stalling as the emulator's traffic core did over the case's runs (`measured_stalls`). Every
metric is read from the two backends' summaries (computed by the Rust core), never recomputed
from the tables.

Layout of a suite directory (resumable per case: a case counts when its `case.json` is there
and names the case file's hash and the simulator that made its simulator runs, `sim_build`;
each run directory is written atomically by `Result.save`):

    DIR/cases/<case>/sim-<seed>/    the simulator's results store, one per seed
    DIR/cases/<case>/emu-<k>/       the emulator's, one per run
    DIR/cases/<case>/case.json      the case's status (written last, atomically); a case the
                                emulator could not run is tried again on the next call
    DIR/fidelity.parquet            every case's rows: case × metric: sim, emu, band, pass
    DIR/fidelity.html               the table and a figure of every deviation against its band
"""

from __future__ import annotations

import fcntl
import functools
import html
import json
import math
import os
import shutil
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from aqmlab import engine
from aqmlab.emu.emulate import emulate, preflight
from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.loader import InputModel, KeyedValueError, NonEmptyStr, load
from aqmlab.scenario import Scenario, error_from_validation, parse_scenario
from aqmlab.scenario.units import parse_time
from aqmlab.store.atomic import write_parquet, write_text
from aqmlab.sweep.runner import execute, is_complete, local_pool

__all__ = [
    "Case",
    "Band",
    "BANDS",
    "SIM_SEEDS",
    "EMU_RUNS",
    "load_manifest",
    "score",
    "case_metrics",
    "run_suite",
    "write_table",
    "write_html",
    "FidelityError",
]

_DIR = Path(__file__).parent

#: Simulator seeds per case: the mean over this many runs (the scenario's seed and the next
#: ones). The noisiest means are the DCTCP cases' Jain indices (σ ≈ 0.10–0.11 from seed to
#: seed): over 100 seeds their standard error is ≈ 0.011, a fifth of the ± 0.05 band, so the
#: verdict rests on the emulator's runs and not on which seeds the simulator drew;
#: docs/fidelity.md, "Simulator side".
SIM_SEEDS = 100

#: Emulator runs per case by default: the mean over 3, because one run's Jain index over two
#: loss-based flows varies by up to 0.18 from run to run on this testbed (docs/fidelity.md).
EMU_RUNS = 3

#: The simulator's hosts stall as the emulator's traffic core did (`--sim-stall measured`, the
#: default): its stalls of at least this length, ns. The model has one stall length, and BBR's
#: bandwidth filter keeps the largest rate sample, which the longest stalls make: on this
#: testbed 15 of 19 large rises of BBRv1's estimate came within 3 RTTs after a stall of 1 ms or
#: more (bench/emu/bbr_stalls.py; docs/fidelity.md, "Hosts that stall"). Shorter lateness
#: (0.3–1 ms, mostly interrupt and softirq work on that core) is left out. 1 ms; ours.
STALL_MIN_NS = 1_000_000

#: Where the simulator side's host stalls come from: the case's emulator runs, none, or given.
SimStalls = str | dict[str, str]


@dataclass(frozen=True)
class Band:
    """How far the emulator's value may be from the simulator's: |emu − sim| ≤ max(abs, rel·|sim|)."""

    metric: str
    abs: float
    rel: float
    text: str


# The bands (docs/fidelity.md §Bands gives the reasons):
#: Utilization ± 2 percentage points: the router's rate error is ≤ 0.01 % with the link
#: backlogged (bench/README.md §Emulator), so 2 pp is room for TCP's own run-to-run variation,
#: not for measurement error.
UTIL_BAND = Band("utilization", 0.02, 0.0, "± 2 pp")
#: Each class's share of the goodput ± 0.05: the kernel's class shares vary by σ ≈ 2.5 pp
#: from run to run in the agreement scenarios (docs/emulator.md); ± 2σ.
SHARE_BAND = Band("share", 0.05, 0.0, "± 0.05")
#: Jain's index over all flows ± 0.05: the same run-to-run variation of per-flow goodputs.
JAIN_BAND = Band("jain", 0.05, 0.0, "± 0.05")
#: Mean queueing delay ± 20 % of the simulator's, or ± 0.5 ms when that is larger: the queue's
#: level follows the CC's window dynamics, which the kernel's timers blur; and the emulator's
#: senders wake up to 0.6 ms late (p99 of their start lateness, docs/emulator.md) and then
#: send what is due at once, a burst that queues for a fraction of a millisecond where the
#: noise-free simulator has none (the CBR underload case: 0 ms against ≈ 0.3 ms).
DELAY_BAND = Band("sojourn_mean_ms", 0.5, 0.20, "± 20 % (min 0.5 ms)")
BANDS = (UTIL_BAND, SHARE_BAND, JAIN_BAND, DELAY_BAND)


class FidelityError(ScenarioError):
    """A bad manifest or case, or a case name that is not in the suite."""


@dataclass(frozen=True)
class Case:
    name: str
    file: Path
    what: str
    quick: bool
    scenario: Scenario
    text: str

    @property
    def hash(self) -> str:
        """The case file's identity: its scenario hash (every default filled in)."""
        return self.scenario.hash()

    def seeded(self, k: int) -> Scenario:
        """The scenario of the case's k-th run on either backend (k from 0): the case's seed + k,
        so the emulator's run k has the start times of the simulator's seed k."""
        return self.scenario.model_copy(update={"seed": self.scenario.seed + k})

    def sim_seeded(self, k: int, sim_host: dict[str, str] | None) -> Scenario:
        """The scenario of the simulator's k-th run: [`Case.seeded`] with `sim_host`'s keys
        set in its `[host]` table (the stalls of the emulator's hosts, `--sim-stall`)."""
        s = self.seeded(k)
        if not sim_host:
            return s
        d = s.model_dump(mode="json", exclude_unset=True) | {"seed": s.seed}
        d["host"] = {**d.get("host", {}), **sim_host}
        try:
            return Scenario.model_validate(d)
        except ValidationError as e:
            raise error_from_validation(e, None, None) from None


class CaseEntry(InputModel):
    """One ``[[case]]`` of the manifest: the case's name, its scenario file (relative to the
    manifest), what it shows, and whether it is in the short subset (``--quick``)."""

    name: NonEmptyStr
    file: NonEmptyStr
    what: NonEmptyStr
    quick: bool = False


class Manifest(InputModel):
    """The suite's ``manifest.toml``: its cases, in the order they run."""

    case: list[CaseEntry] = Field(default_factory=list, validate_default=True)

    @field_validator("case")
    @classmethod
    def _cases(cls, v: list[CaseEntry]) -> list[CaseEntry]:
        if not v:
            raise ValueError("no [[case]] tables")
        names: list[str] = []
        for i, c in enumerate(v):
            if c.name in names:
                raise KeyedValueError(f"[{i}].name", f"duplicate case {c.name!r}", relative=True)
            names.append(c.name)
        return v


def load_manifest(directory: Path = _DIR) -> list[Case]:
    """The suite's cases, in the manifest's order, each scenario validated."""
    mpath = directory / "manifest.toml"
    manifest = load(Manifest, read_utf8(mpath, FidelityError), file=str(mpath), error=FidelityError)
    cases: list[Case] = []
    for c in manifest.case:
        f = directory / c.file
        ctext = read_utf8(f, FidelityError)
        s = parse_scenario(ctext, file=str(f), default_name=f.stem, base_dir=f.parent)
        cases.append(Case(c.name, f, c.what, c.quick, s, ctext))
    return cases


def user_case(path: Path, suite: list[Case]) -> Case:
    """A scenario file of the user's as a case, named by its file's stem and scored with the
    suite's bands: a design of one's own (a plugin CC or discipline) on both backends."""
    if not path.is_file():
        raise FidelityError(f"--cases: {path}: no such scenario file")
    text = read_utf8(path, FidelityError)
    s = parse_scenario(text, file=str(path), default_name=path.stem, base_dir=path.parent)
    if path.stem in {c.name for c in suite}:
        raise FidelityError(f"--cases: {path}: its name {path.stem!r} is one of the suite's cases; rename the file")
    return Case(path.stem, path.resolve(), f"your case ({path})", False, s, text)


def select(cases: list[Case], names: list[str] | None, quick: bool) -> list[Case]:
    """The cases to run: the suite's named ones and scenario files (`*.toml`), in the order
    given; none named: every case, or the quick ones."""
    if names:
        known = {c.name: c for c in cases}
        bad = [n for n in names if n not in known and not n.endswith(".toml")]
        if bad:
            raise FidelityError(f"--cases: unknown case {', '.join(map(repr, bad))} (cases: {', '.join(known)}; or a scenario file of yours, FILE.toml)")
        chosen = [known[n] if n in known else user_case(Path(n), cases) for n in names]
        dup = sorted({c.name for c in chosen if [x.name for x in chosen].count(c.name) > 1})
        if dup:
            raise FidelityError(f"--cases: {', '.join(map(repr, dup))} named twice")
        return chosen
    return [c for c in cases if c.quick] if quick else cases


# ------------------------------------------------------------------------------------------
# Metrics and scoring
# ------------------------------------------------------------------------------------------


def case_metrics(summary: dict[str, Any]) -> dict[str, float | None]:
    """The scored metrics of one run, from its summary: utilization, mean queueing delay,
    Jain's index (two or more flows), and each class's share of the goodput (two or more
    classes). One flow's Jain index and one class's share are 1 by definition: not scored."""
    m = summary["metrics"]
    out: dict[str, float | None] = {"utilization": m["utilization"], "sojourn_mean_ms": m["sojourn_ms"]["mean"]}
    if (m.get("flows") or 0) >= 2:
        out["jain"] = m["jain"]
    classes = summary["classes"]
    if len(classes) >= 2:
        total = sum(c["goodput_bps"] for c in classes)
        for c in classes:
            out[f"share:{c['name']}"] = c["goodput_bps"] / total if total else None
    return out


def band_of(metric: str) -> Band:
    return SHARE_BAND if metric.startswith("share:") else {b.metric: b for b in BANDS}[metric]


def score(metric: str, sim: float | None, emu: float | None) -> dict[str, Any]:
    """One row: the band, |emu − sim| against its tolerance, and whether it passes."""
    b = band_of(metric)
    if sim is None or emu is None:
        return {"metric": metric, "sim": sim, "emu": emu, "band": b.text, "tolerance": None, "diff": None, "deviation": None, "pass": None}
    tol = max(b.abs, b.rel * abs(sim))
    diff = emu - sim
    return {"metric": metric, "sim": sim, "emu": emu, "band": b.text, "tolerance": tol, "diff": diff, "deviation": abs(diff) / tol, "pass": abs(diff) <= tol}


def _mean(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return sum(ys) / len(ys) if len(ys) == len(xs) and ys else None


def _range(xs: list[float | None]) -> tuple[float | None, float | None]:
    ys = [x for x in xs if x is not None]
    return (min(ys), max(ys)) if len(ys) == len(xs) and ys else (None, None)


def _std_error(xs: list[float | None]) -> float | None:
    """The standard error of the mean of `xs` (sample standard deviation ÷ √n); None below two
    values."""
    ys = [x for x in xs if x is not None]
    return statistics.stdev(ys) / math.sqrt(len(ys)) if len(ys) == len(xs) and len(ys) >= 2 else None


def score_case(sims: list[dict[str, Any]], emus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Score a case from its simulator summaries (mean over seeds) and emulator summaries (mean
    over runs): one row per metric, in the simulator's metric order, with the smallest and
    largest single seed or run beside each mean, and `se`, the standard error of the
    difference of the two means (both sides' spread; None with a single emulator run): a
    verdict whose |diff| lies within about 2·se of its tolerance could turn with other runs."""
    sm = [case_metrics(s) for s in sims]
    em = [case_metrics(e) for e in emus]
    rows = []
    for k in sm[0]:
        sv, ev = [m.get(k) for m in sm], [m.get(k) for m in em]
        (s_lo, s_hi), (e_lo, e_hi) = _range(sv), _range(ev)
        se_sim, se_emu = _std_error(sv), _std_error(ev)
        se = math.hypot(se_sim, se_emu) if se_sim is not None and se_emu is not None else None
        rows.append({**score(k, _mean(sv), _mean(ev)), "se": se, "sim_min": s_lo, "sim_max": s_hi, "emu_min": e_lo, "emu_max": e_hi})
    return rows


# ------------------------------------------------------------------------------------------
# Running the suite
# ------------------------------------------------------------------------------------------


def _stored(run_dir: Path, scenario_hash: str) -> dict[str, Any] | None:
    """A complete results store of this scenario, else None (a partial one is removed)."""

    if run_dir.exists():
        if is_complete(run_dir, scenario_hash):
            return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        shutil.rmtree(run_dir)
    return None


@functools.cache
def sim_build() -> str:
    """Which simulator made a case's simulator runs: a digest of the native module, so that runs
    of an older simulator are made again rather than scored against the emulator."""
    return engine.build_id()


def measured_stalls(emus: list[dict[str, Any]]) -> tuple[dict[str, str] | None, str]:
    """The `[host] stall` and `stall_every` that match the emulator's traffic core over `emus`
    (their summaries' `emu.stalls`), and a line saying so. A stall's length is its measured
    lateness plus half the probe's period: the probe sees a stall at the first deadline inside
    it, and the stall began a uniform fraction of a period before that deadline. The stalls of
    `STALL_MIN_NS` or more count; their mean length is the model's, and the probed time over
    their count its mean interval. None when there were none."""
    lengths: list[int] = []
    window_ns = 0
    for e in emus:
        st = e["emu"]["stalls"]
        window_ns += st["window_ns"]
        for cpu in st["cpus"].values():
            if cpu["role"] in ("traffic", "all"):
                lengths += [late + st["period_ns"] // 2 for _, late in cpu["stalls"] if late + st["period_ns"] // 2 >= STALL_MIN_NS]
    runs = f"{len(emus)} emulator run(s), {window_ns / 1e9:g} s"
    if not lengths:
        return None, f"none: no stall of {STALL_MIN_NS / 1e6:g} ms or more on the emulator's traffic core over {runs}"
    host = {"stall": f"{round(statistics.fmean(lengths) / 1e3)}us", "stall_every": f"{round(window_ns / len(lengths) / 1e6)}ms"}
    return host, f"measured: {len(lengths)} stalls of {STALL_MIN_NS / 1e6:g} ms or more on the emulator's traffic core over {runs}"


def _has_stalls(summary: dict[str, Any] | None) -> bool:
    return summary is not None and bool((summary.get("emu") or {}).get("stalls"))


def resolve_sim_host(sim_stalls: SimStalls, emus: list[dict[str, Any]]) -> tuple[dict[str, str] | None, str]:
    """The simulator side's `[host]` keys for a case whose emulator runs are `emus`."""
    if isinstance(sim_stalls, dict):
        return (sim_stalls or None), "given (--sim-stall)"
    if sim_stalls == "none":
        return None, "none (--sim-stall none)"
    return measured_stalls(emus)


def _emu_stored(cdir: Path, case: Case, k: int, sim_stalls: SimStalls) -> dict[str, Any] | None:
    """The emulator's k-th run of `case` if it is stored and complete (with its stall record
    when the simulator side takes its stalls from it)."""
    summary = _stored(cdir / f"emu-{k}", case.seeded(k - 1).hash())
    return summary if sim_stalls != "measured" or _has_stalls(summary) else None


def case_done(out: Path, case: Case, emu_runs: int, sim_stalls: SimStalls = "measured") -> dict[str, Any] | None:
    p = out / "cases" / case.name / "case.json"
    if not p.is_file():
        return None
    doc = json.loads(p.read_text(encoding="utf-8"))
    if doc.get("hash") != case.hash or doc.get("emu_runs") != emu_runs or doc.get("sim_seeds") != SIM_SEEDS or doc.get("sim_build") != sim_build():
        return None
    if doc["status"] != "scored":
        return None  # why it could not run is the machine's state: asked again on every call
    # Scored again from the stored summaries, so the rows always follow the current bands; a
    # run removed or left incomplete since makes the case not done (run_case redoes that run).
    cdir = p.parent
    emus = [_emu_stored(cdir, case, k, sim_stalls) for k in range(1, emu_runs + 1)]
    if any(x is None for x in emus):
        return None
    sim_host, _ = resolve_sim_host(sim_stalls, emus)  # type: ignore[arg-type]
    if doc.get("sim_host") != sim_host:
        return None
    sims = [_stored(cdir / f"sim-{s.seed}", s.hash()) for s in (case.sim_seeded(k, sim_host) for k in range(SIM_SEEDS))]
    if any(x is None for x in sims):
        return None
    doc["rows"] = score_case(sims, emus)  # type: ignore[arg-type]
    return doc


def not_run_reason(case: Case) -> str | None:
    """Why the emulator cannot run this case here (the emulator's own refusal), else None."""

    try:
        preflight(case.scenario)
    except ScenarioError as e:
        return str(e.detail if e.key is None else f"{e.key}: {e.detail}")
    return None


@contextmanager
def _held(lock: Path | None) -> Iterator[None]:
    """An exclusive flock(2) on `lock` while the block runs (None: no lock)."""
    if lock is None:
        yield
        return
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _router_steal_ms(summary: dict[str, Any]) -> float | None:
    """The hypervisor's steal time on the router's CPU during an emulator run, ms (None when
    the run did not record it)."""
    emu = summary.get("emu") or {}
    cpu = (emu.get("pinning") or {}).get("router_cpu")
    steal = emu.get("steal_ms") or {}
    return steal.get(f"cpu{cpu}") if cpu is not None else None


def run_case(
    out: Path,
    case: Case,
    *,
    emu_runs: int = EMU_RUNS,
    lock: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    sim_stalls: SimStalls = "measured",
) -> dict[str, Any]:
    """Run one case on both backends (reusing complete runs) and write its case.json: the
    emulator first, since the simulator's hosts take their stalls from its runs
    (`sim_stalls`: "measured", the default; "none"; or the `[host]` keys to give)."""

    cdir = out / "cases" / case.name
    cdir.mkdir(parents=True, exist_ok=True)
    old = cdir / "case.json"
    old_doc: dict[str, Any] = json.loads(old.read_text(encoding="utf-8")) if old.is_file() else {}
    with _held(lock):  # the emulator's refusal may depend on another run in progress
        reason = not_run_reason(case)
    doc: dict[str, Any] = {
        "case": case.name,
        "file": case.file.name,
        "what": case.what,
        "hash": case.hash,
        "sim_seeds": SIM_SEEDS,
        "sim_build": sim_build(),
        "emu_runs": emu_runs,
    }
    if reason is not None:
        doc.update(status=f"not run: {reason}", rows=[], load={}, sim_host=None)
        write_text(cdir / "case.json", json.dumps(doc, indent=1) + "\n")
        return doc
    # The machine's 1-minute load average as each emulator run started (kept across resumes).
    loads: dict[str, float] = old_doc.get("load", {})
    loads = loads if isinstance(loads, dict) else {}
    emus = []
    for k in range(1, emu_runs + 1):
        d = cdir / f"emu-{k}"
        s = case.seeded(k - 1)
        summary = _emu_stored(cdir, case, k, sim_stalls)
        if summary is None:
            log(f"{case.name}: emulator, run {k} (seed {s.seed})")
            with _held(lock):
                loads[d.name] = round(os.getloadavg()[0], 2)
                summary = emulate(s, d, overwrite=True).summary
        emus.append(summary)
    sim_host, stalls_from = resolve_sim_host(sim_stalls, emus)
    # The seeds not already stored, run in parallel, one worker per core.
    same_sim = old_doc.get("sim_build") == sim_build()
    seeded = [case.sim_seeded(k, sim_host) for k in range(SIM_SEEDS)]
    sim_dirs = [cdir / f"sim-{s.seed}" for s in seeded]
    todo = [(s, d) for s, d in zip(seeded, sim_dirs) if not (same_sim and _stored(d, s.hash()))]
    if todo:
        log(f"{case.name}: simulator, {len(todo)} seed(s)")
        with local_pool(min(os.cpu_count() or 1, len(todo))) as pool:
            for fut in [pool.submit(execute, s.canonical_json(), s.hash(), str(d)) for s, d in todo]:
                fut.result()
    sims = [json.loads((d / "summary.json").read_text(encoding="utf-8")) for d in sim_dirs]
    doc.update(
        status="scored",
        rows=score_case(sims, emus),
        sim_host=sim_host,
        sim_stalls_from=stalls_from,
        load={k: v for k, v in loads.items() if k in {f"emu-{i}" for i in range(1, emu_runs + 1)}},
        late_p50_ms=[e["counters"]["late_p50_ns"] / 1e6 if "late_p50_ns" in e["counters"] else None for e in emus],
        late_p99_ms=[e["counters"].get("late_p99_ns", 0) / 1e6 for e in emus],
        late_max_ms=[e["counters"].get("late_max_ns", 0) / 1e6 for e in emus],
        steal_ms=[_router_steal_ms(e) for e in emus],
        kernel=emus[0].get("emu", {}).get("kernel"),
    )
    write_text(cdir / "case.json", json.dumps(doc, indent=1) + "\n")
    return doc


def run_suite(
    out: Path,
    cases: list[Case],
    *,
    emu_runs: int = EMU_RUNS,
    lock: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    on_case: Callable[[Case, dict[str, Any]], None] | None = None,
    sim_stalls: SimStalls = "measured",
) -> list[dict[str, Any]]:
    """Run every case of `cases` not already complete in `out` and return their documents; then
    write fidelity.parquet and .html for every case of the suite complete in `out` (those run
    now and those run before, in the manifest's order), so that running a few cases again
    never drops the others from the table. `sim_stalls` says where the simulator's host stalls
    come from (`run_case`); a case whose simulator runs had other stalls has them made again."""
    out.mkdir(parents=True, exist_ok=True)
    docs = []
    for c in cases:
        doc = case_done(out, c, emu_runs, sim_stalls) or run_case(out, c, emu_runs=emu_runs, lock=lock, log=log, sim_stalls=sim_stalls)
        docs.append(doc)
        if on_case:
            on_case(c, doc)
    ran = {d["case"]: d for d in docs}
    manifest = load_manifest()
    every = [ran.pop(c.name, None) or case_done(out, c, emu_runs, sim_stalls) for c in manifest]
    table = [d for d in every if d is not None] + list(ran.values())
    write_table(out, table)
    write_html(out, table)
    return docs


def rows_of(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case × metric; a case not run is one row with its reason."""
    rows = []
    for d in docs:
        host = d.get("sim_host") or {}
        base = {
            "case": d["case"],
            "status": d["status"],
            "sim_seeds": d["sim_seeds"],
            "emu_runs": d["emu_runs"],
            "sim_stall": host.get("stall"),
            "sim_stall_every": host.get("stall_every"),
        }
        if not d["rows"]:
            rows.append(
                {
                    **base,
                    "metric": None,
                    "sim": None,
                    "emu": None,
                    "band": None,
                    "tolerance": None,
                    "diff": None,
                    "deviation": None,
                    "pass": None,
                    "se": None,
                    "sim_min": None,
                    "sim_max": None,
                    "emu_min": None,
                    "emu_max": None,
                }
            )
        for r in d["rows"]:
            rows.append({**base, **r})
    return rows


def write_table(out: Path, docs: list[dict[str, Any]]) -> Path:
    import pyarrow as pa

    cols = {
        "case": pa.string(),
        "metric": pa.string(),
        "sim": pa.float64(),
        "emu": pa.float64(),
        "band": pa.string(),
        "tolerance": pa.float64(),
        "diff": pa.float64(),
        "deviation": pa.float64(),
        "pass": pa.bool_(),
        "se": pa.float64(),
        "status": pa.string(),
        "sim_seeds": pa.int64(),
        "emu_runs": pa.int64(),
        "sim_min": pa.float64(),
        "sim_max": pa.float64(),
        "emu_min": pa.float64(),
        "emu_max": pa.float64(),
        "sim_stall": pa.string(),
        "sim_stall_every": pa.string(),
    }
    rows = rows_of(docs)
    # A stored case.json may lack the range and se keys: they are null then.
    table = pa.table({k: pa.array([r.get(k) for r in rows], type=t) for k, t in cols.items()})
    write_parquet(out / "fidelity.parquet", table)
    return out / "fidelity.parquet"


def is_close_call(row: dict[str, Any]) -> bool:
    """Whether the verdict could turn with other seeds and runs: |diff| lies within two
    standard errors of the band's edge."""
    se = row.get("se")
    return se is not None and row["diff"] is not None and abs(abs(row["diff"]) - row["tolerance"]) < 2 * se


def summary_counts(docs: list[dict[str, Any]]) -> dict[str, int]:
    """Cases scored / passing every band / not run; metric rows scored / passing / close calls."""
    scored = [d for d in docs if d["status"] == "scored"]
    rows = [r for d in scored for r in d["rows"] if r["pass"] is not None]
    return {
        "cases": len(docs),
        "cases_scored": len(scored),
        "cases_passed": sum(all(r["pass"] for r in d["rows"] if r["pass"] is not None) for d in scored),
        "cases_not_run": len(docs) - len(scored),
        "metrics": len(rows),
        "metrics_passed": sum(bool(r["pass"]) for r in rows),
        "metrics_close": sum(is_close_call(r) for r in rows),
    }


def close_calls_text(n: dict[str, int]) -> str:
    """The summary's sentence on close calls ('' when there are none)."""
    k = n["metrics_close"]
    return (
        f"{k} verdict{'s' if k != 1 else ''} within two standard errors of the band's edge: more emulator runs (--emu-runs) would settle {'them' if k != 1 else 'it'}."
        if k
        else ""
    )


def _fmt(metric: str | None, v: float | None) -> str:
    if v is None or metric is None:
        return "–"
    if metric == "sojourn_mean_ms":
        return f"{v:.2f} ms"
    if metric == "utilization":
        return f"{100 * v:.1f} %"
    return f"{v:.3f}"


def _grey(text: str) -> str:
    return f"<span style='color:#6b7280'>{text}</span>"


def fmt_range(row: dict[str, Any], side: str, dim: Callable[[str], str]) -> str:
    """The mean, and the extreme seed or run in brackets where they print differently, the
    brackets passed through `dim` (the page's grey span, the terminal's dim markup)."""
    lo, hi, metric = row.get(f"{side}_min"), row.get(f"{side}_max"), row["metric"]
    mean = _fmt(metric, row[side])
    if lo is None or hi is None or _fmt(metric, lo) == _fmt(metric, hi):
        return mean
    return f"{mean} {dim(f'({_fmt(metric, lo)} – {_fmt(metric, hi)})')}"


def fmt_deviation(row: dict[str, Any]) -> str:
    """|diff| ÷ tolerance, and its standard error in the same unit where known: `1.41 ± 0.20`."""
    if row["deviation"] is None:
        return "–"
    se = row.get("se")
    return f"{row['deviation']:.2f}" if se is None else f"{row['deviation']:.2f} ± {se / row['tolerance']:.2f}"


def sim_hosts_text(docs: list[dict[str, Any]]) -> str:
    """Where the suite's simulator hosts took their stalls from, for the table's title and the
    page: the emulator's runs of each case (their range), the given ones, or none."""
    scored = [d for d in docs if d.get("status") == "scored"]
    measured = [d for d in scored if str(d.get("sim_stalls_from", "")).startswith(("measured", "none:"))]
    if measured:
        hosts = [d["sim_host"] for d in measured if d.get("sim_host")]
        if not hosts:
            return ", its hosts never stalling (none measured on the emulator's traffic core)"
        ms = [parse_time(h["stall"]) / 1e6 for h in hosts]
        every = [parse_time(h["stall_every"]) / 1e9 for h in hosts]
        quiet = len(measured) - len(hosts)
        return (
            f", its hosts stalling as the emulator's traffic core did in each case's runs ({min(ms):.2f}–{max(ms):.2f} ms every {min(every):.2f}–{max(every):.2f} s"
            + (f"; none in {quiet} case(s)" if quiet else "")
            + ")"
        )
    given = {json.dumps(d.get("sim_host"), sort_keys=True) for d in scored if d.get("sim_host")}
    if not given:
        return ""
    return ", its hosts stalling " + " / ".join(f"{h['stall']} every {h['stall_every']}" for h in map(json.loads, sorted(given))) + " (--sim-stall)"


def write_html(out: Path, docs: list[dict[str, Any]]) -> Path:
    """A static page: the counts, every case's rows, and each deviation ÷ its tolerance."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from aqmlab.report.page import Page

    page = Page("aqmlab fidelity — simulator against the emulator (real Linux TCP)", out / "fidelity-figures")
    n = summary_counts(docs)
    page.para(
        f"{n['cases']} cases: {n['cases_scored']} scored on both backends, {n['cases_passed']} of them within every band; {n['cases_not_run']} not run. "
        f"{n['metrics_passed']} of {n['metrics']} metrics within their bands. Simulator: mean over {SIM_SEEDS} seeds{sim_hosts_text(docs)}; emulator: "
        f"{docs[0]['emu_runs'] if docs else EMU_RUNS} run(s) per case; in brackets, the smallest and largest single seed or run. Bands: utilization ± 2 pp, each class's share ± 0.05, Jain ± 0.05, "
        "mean queueing delay ± 20 % (at least 0.5 ms); docs/fidelity.md gives their reasons. " + close_calls_text(n)
    )
    scored = [(d["case"], r) for d in docs for r in d["rows"] if r["deviation"] is not None]
    if scored:
        fig, ax = plt.subplots(figsize=(8, 0.22 * len(scored) + 1.2))
        labels = [f"{c} · {r['metric']}" for c, r in scored]
        devs = [r["deviation"] for _, r in scored]
        ax.barh(range(len(scored)), devs, color=["#1a7f37" if r["pass"] else "#b42318" for _, r in scored])
        ax.axvline(1.0, color="#444", lw=0.8, ls="--")
        ax.set_yticks(range(len(scored)), labels, fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("|emu − sim| ÷ tolerance (≤ 1: within the band)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", lw=0.3, alpha=0.6)
        fig.tight_layout()
        page.figure(fig, "deviation", "each metric's deviation between the backends, in units of its band")
    body = []
    for d in docs:
        if not d["rows"]:
            body.append(f"<tr><td>{html.escape(d['case'])}</td><td colspan=6 style='color:#6b7280'>{html.escape(d['status'])}</td></tr>")
        for r in d["rows"]:
            ok = "–" if r["pass"] is None else ("pass" if r["pass"] else "MISS")
            dev = fmt_deviation(r)
            colour = "#1a7f37" if r["pass"] else "#b42318" if r["pass"] is False else "#6b7280"
            body.append(
                f"<tr><td>{html.escape(d['case'])}</td><td>{html.escape(r['metric'])}</td><td>{fmt_range(r, 'sim', _grey)}</td><td>{fmt_range(r, 'emu', _grey)}</td>"
                f"<td>{html.escape(r['band'])}</td><td>{dev}</td><td style='color:{colour};font-weight:600'>{ok}</td></tr>"
            )
    page.parts.append(
        "<table class='nums'><thead><tr><th>case</th><th>metric</th><th>simulator</th><th>emulator</th><th>band</th><th>deviation ÷ tolerance (± its standard error)</th><th></th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
    )
    page.heading("The cases")

    def load(d: dict[str, Any]) -> str:
        la = d.get("load") or {}
        text = f" — load average at its emulator runs: {', '.join(f'{v:g}' for v in la.values())}" if isinstance(la, dict) and la else ""
        late = d.get("late_max_ms") or []
        steal = d.get("steal_ms") or []
        if late:
            text += f"; the router's latest write per run: {', '.join(f'{v:.1f}' for v in late)} ms"
        if steal and all(v is not None for v in steal):
            text += f"; steal time on its CPU: {', '.join(f'{v:g}' for v in steal)} ms"
        if d.get("sim_stalls_from"):
            h = d.get("sim_host")
            text += (
                f"; the simulator's host stalls: {h['stall']} every {h['stall_every']} ({d['sim_stalls_from']})"
                if h
                else f"; the simulator's host stalls: {d['sim_stalls_from']}"
            )
        return text

    page.parts.append(
        "<ul>" + "".join(f"<li><b>{html.escape(d['case'])}</b> ({html.escape(d['file'])}): {html.escape(d['what'])}{load(d)}</li>" for d in docs) + "</ul>"
    )
    page.write(out / "fidelity.html")
    return out / "fidelity.html"
