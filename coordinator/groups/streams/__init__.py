"""Streams groups (KIP-1071): Kafka Streams' own rebalance protocol as the coordinator's fourth group
type (StreamsGroupHeartbeat, StreamsGroupDescribe)."""
