"""Consumer groups (KIP-848; Kafka's ConsumerGroup): state, heartbeat, reconciliation, server-side
assignors, topic regexes, offsets, and online migration to and from the classic protocol. Plugged
into the partition's shard as a group type (consumer_on_demand.py, imported with its first use)."""
