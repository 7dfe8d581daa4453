"""Which class implements which service — the one place that imports them all."""

from __future__ import annotations

from agentstream.config import SERVICES, Settings
from agentstream.service import Service


def build_service(name: str, settings: Settings, **kwargs: object) -> Service:
    if name == "ingress":
        from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress

        return bootstrap_ingress(settings)
    if name == "agent-runner":
        from agentstream_runner.bootstrap import bootstrap as bootstrap_runner

        return bootstrap_runner(settings)
    if name == "tool-executor":
        from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

        return bootstrap_tool_executor(settings)
    if name == "delivery":
        from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery

        return bootstrap_delivery(settings, **kwargs)  # type: ignore[arg-type]
    if name == "persistence":
        from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence

        return bootstrap_persistence(settings)
    raise ValueError(f"unknown service {name!r}; choose one of: {', '.join(SERVICES)}")


def build_all(settings: Settings, **delivery_kwargs: object) -> list[Service]:
    return [build_service(n, settings, **(delivery_kwargs if n == "delivery" else {})) for n in SERVICES]
