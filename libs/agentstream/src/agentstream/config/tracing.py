"""The `tracing` section: OpenTelemetry spans exported over OTLP, off unless enabled."""

from __future__ import annotations

from pydantic import Field

from agentstream.config.core import Section


class TracingSettings(Section):
    """Off by default: nothing of the OpenTelemetry SDK is imported or run unless `enabled`."""

    enabled: bool = Field(default=False, description="Record spans and carry trace context in Kafka headers.")
    otlp_endpoint: str = Field(
        default="http://localhost:4318/v1/traces",
        description="Where spans go: an OTLP/HTTP (protobuf) traces endpoint, e.g. an OpenTelemetry Collector.",
    )
    service_name: str = Field(
        default="agentstream",
        min_length=1,
        description="Prefix of each service's `service.name` resource attribute (`<prefix>-<service>`).",
    )
    sample_ratio: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Share of new traces recorded (a run follows the decision of the trace it continues).",
    )
