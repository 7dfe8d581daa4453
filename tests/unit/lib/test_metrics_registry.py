"""Each service's registry has the process, platform and GC collectors, its own."""

from __future__ import annotations

from agentstream.metrics import new_registry


def test_a_new_registry_has_process_platform_and_gc_metrics() -> None:
    names = {family.name for family in new_registry().collect()}
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info", "python_gc_collections"} <= names


def test_two_registries_do_not_share_collectors() -> None:
    first, second = new_registry(), new_registry()
    assert first.get_sample_value("python_gc_collections_total", {"generation": "0"}) is not None
    assert second.get_sample_value("python_gc_collections_total", {"generation": "0"}) is not None
