"""Imports that must happen before any test runs."""

import os

# The CLI's rich consoles fix their width from COLUMNS when they are made. Made during a CliRunner
# invocation that sets COLUMNS, they would keep that width for every later test in the process (with
# test files spread over xdist workers, whichever file came first decided it); made here, without
# COLUMNS, they read it at each invocation, as a fresh process does.
_columns = os.environ.pop("COLUMNS", None)
from agentstream_stack import cli_support  # noqa: E402, F401

if _columns is not None:
    os.environ["COLUMNS"] = _columns

# Hypothesis's timing checks judge the machine, not the code: under a loaded CI (three xdist workers on
# two cores, brokers beside them) generating examples or running one can take seconds. A property test
# fails only on an example that breaks its property; every @settings here inherits this profile.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("agentstream", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agentstream")
