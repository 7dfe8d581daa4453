"""Test support: fixtures (pytest plugin `agentstream_testing.fixtures`) and fakes."""
