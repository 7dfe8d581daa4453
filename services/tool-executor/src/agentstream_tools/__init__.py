"""tool-executor: consumes `tool-calls`, produces `tool-results`; built by `bootstrap.bootstrap`."""
