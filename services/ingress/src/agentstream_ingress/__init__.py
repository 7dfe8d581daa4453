"""ingress: consumes `inbound`, produces `runs`, `events` and `dlq`."""
