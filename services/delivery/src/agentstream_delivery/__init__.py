"""delivery service package."""
