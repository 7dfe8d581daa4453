"""tool-executor service package."""
