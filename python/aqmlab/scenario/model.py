"""The scenario model: typed, validated, frozen; loaded from TOML (``scenario.load``) or built
in Python. Its canonical form — every default filled in, quantities in canonical spelling —
names it: the hash of that form keys its results in every store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import (
    Field,
    model_validator,
)

from aqmlab.inputs.loader import KeyedValueError
from aqmlab.scenario import lower
from aqmlab.scenario import units as u
from aqmlab.scenario.parts import (
    Bottleneck,
    Flows,
    Host,
    Marker,
    Measure,
    Model,
    PositiveTime,
    Time,
    Workload,
    cc_label,
    reads_packet_values,
)

__all__ = ["Scenario"]


class Scenario(Model):
    """A scenario. Build it from TOML (``load_scenario``) or directly in Python."""

    name: str = "scenario"
    duration: PositiveTime
    warmup: Time = "0s"
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 1
    bottleneck: Bottleneck
    flows: list[Flows] = Field(default_factory=list)
    workload: list[Workload] = Field(default_factory=list)
    #: Packet values for PPV/CSAQM; None = the equal-share default when the discipline reads
    #: values. Refused with any other discipline (it would have no effect).
    marker: Marker | None = None
    measure: Measure = Field(default_factory=Measure)
    #: The end hosts (all of them): Linux's offloads by default.
    host: Host = Field(default_factory=Host)

    @model_validator(mode="after")
    def _checks(self) -> Scenario:
        if not self.flows and not self.workload:
            raise ValueError("a scenario needs at least one [[flows]] class or [[workload]]")
        # The engine checks the rest across tables (warmup against duration, a marker only for
        # a discipline that reads packet values, stops after starts): EngineConfig::check.
        if self.marker is not None:
            names = self.class_names()
            for key in ("weights", "curves"):
                for name in getattr(self.marker, key):
                    if name not in names:
                        raise KeyedValueError(f"marker.{key}.{name}", f"no flow class named {name!r} (classes: {', '.join(names)})")
        return self

    def effective_marker(self) -> Marker | None:
        """The marker the run uses: the given one, the equal-share default for a discipline
        that reads packet values, None for the others."""
        if not reads_packet_values(self.bottleneck.aqm):
            return None
        return self.marker or Marker()

    # -- derived ---------------------------------------------------------------------------

    def class_names(self) -> list[str]:
        """Names of the flow classes (`<cc>-<rtt>`), then of the workloads
        (`<cc>-<rtt>-arrivals`); a plugin CC is named by its struct_ops `.name` (`cc_label`)."""
        names: list[str] = []
        bases = [f.name or f"{cc_label(f.cc)}-{f.rtt}" for f in self.flows] + [w.name or f"{cc_label(w.cc)}-{w.rtt}-arrivals" for w in self.workload]
        for base in bases:
            n, k = base, 2
            while n in names:
                n, k = f"{base}-{k}", k + 1
            names.append(n)
        return names

    def classes(self) -> list[Flows | Workload]:
        """The flow classes, then the workloads: the engine config's classes, in its order."""
        return [*self.flows, *self.workload]

    def rtt_ref_ns(self) -> int:
        if self.bottleneck.rtt_ref is not None:
            return u.parse_time(self.bottleneck.rtt_ref)
        return min(u.parse_time(f.rtt) for f in self.classes())

    def canonical(self) -> dict[str, Any]:
        """The scenario's canonical form, which names it (`hash`): every part by `Model.canonical`'s
        rule, and what is derived spelt out — the reference RTT, each class's name, and the
        marker only where the discipline reads packet values (the default one if none is given)."""
        d = super().canonical()
        d["bottleneck"]["rtt_ref"] = u.format_time(self.rtt_ref_ns())
        marker = self.effective_marker()
        d.pop("marker", None)
        if marker is not None:
            d["marker"] = marker.canonical()
        for f, name in zip([*d["flows"], *d["workload"]], self.class_names()):
            f["name"] = name
        return d

    def canonical_json(self) -> str:
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))

    def hash(self) -> str:
        """First 16 hex digits of the SHA-256 of the canonical JSON."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    def engine_config(self) -> dict[str, Any]:
        """The engine's config: every part lowered (`scenario.lower`), all integers."""
        rtt_ref = self.rtt_ref_ns()
        names = self.class_names()
        n_flows = len(self.flows)
        classes = [lower.flow_class(f, n) for f, n in zip(self.flows, names)]
        rate = u.parse_rate(self.bottleneck.rate)
        classes += [lower.workload_class(w, n, rate) for w, n in zip(self.workload, names[n_flows:])]
        return {
            "name": self.name,
            "seed": self.seed,
            "duration_ns": u.parse_time(self.duration),
            "warmup_ns": u.parse_time(self.warmup),
            "bottleneck": lower.bottleneck(self.bottleneck, rtt_ref),
            "classes": classes,
            # A marker given with a discipline that reads no values goes to the engine, which
            # refuses it.
            "marker": lower.marker(self.marker or self.effective_marker(), names),
            "measure": lower.measure(self.measure),
            "host": self.host.engine(),
        }
