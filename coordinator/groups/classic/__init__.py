"""Classic groups (Kafka's ClassicGroup / the seeds' GroupCoordinator): the shard of one
`__consumer_offsets` partition (classic.py), group and member state, every state change
(transitions.py), JoinGroup, SyncGroup/Heartbeat/LeaveGroup, offsets, admin and test controls."""
