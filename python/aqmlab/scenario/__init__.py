"""The scenario: its validated model (parts.py, model.py), its units (units.py), its reading
from TOML (load.py) and its lowering into the engine's config (lower.py). Other packages
import from here."""

from aqmlab.inputs.errors import ScenarioError
from aqmlab.scenario.load import check_with_engine, error_from_validation, load_scenario, parse_scenario
from aqmlab.scenario.model import Scenario
from aqmlab.scenario.parts import AQM_MODELS, VALUE_AQMS, Flows, Host, Marker, Workload, available, cc_label, plugin_cc

__all__ = [
    "AQM_MODELS",
    "VALUE_AQMS",
    "Flows",
    "Host",
    "Marker",
    "Scenario",
    "ScenarioError",
    "Workload",
    "available",
    "cc_label",
    "check_with_engine",
    "error_from_validation",
    "load_scenario",
    "parse_scenario",
    "plugin_cc",
]
