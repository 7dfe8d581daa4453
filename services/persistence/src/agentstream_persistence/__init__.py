"""persistence service package."""
