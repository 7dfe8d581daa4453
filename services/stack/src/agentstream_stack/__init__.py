"""stack service package."""
