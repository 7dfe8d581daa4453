"""Platform webhooks: verification and conversion to `InboundMessage`, as pure functions."""
