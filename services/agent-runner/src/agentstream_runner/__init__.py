"""agent-runner: consumes `runs` + `tool-results`, produces `events` and `tool-calls` (built by `bootstrap.py`)."""
