"""Share groups (KIP-932; Kafka's ShareGroup): membership (ShareGroupHeartbeat, ShareGroupDescribe),
the simple share assignor (a partition may be shared by several members), their records in
`__consumer_offsets`. Plugged into the partition's shard as a group type (share_groups.py). What the
members fetch and acknowledge is the share-partitions' (coordinator/share/)."""
