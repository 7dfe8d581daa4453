"""The parts a service is composed of (docs/architecture.md § Service parts).

Each is small and knows nothing of the others but what it is handed: `DeadLetters` (records to
`dlq` with the reason, counted), `Readiness` (the `/readyz` checks and the ops HTTP app), `Drain`
(no new work, what runs finishes, what is left is cut and counted), `ServiceLag` (consumer lag,
read periodically), `KafkaLink` (the broker, its consumers, its health, their restart on a new
cluster, the bounded final steps). `agentstream.publishing.Publisher` is the publisher part;
`agentstream.kafka.tansu_idle.IdleGating` the embedded broker's idle part, built on Tansu only.
"""
