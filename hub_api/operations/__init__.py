"""Running the hub: liveness, readiness and metrics; the connectors' Kafka Connect verbs; whom a
key belongs to."""
