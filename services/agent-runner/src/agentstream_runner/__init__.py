"""agent-runner service package."""
