"""Test support: fixtures (pytest plugin `agentstream.testing.fixtures`) and fakes."""
