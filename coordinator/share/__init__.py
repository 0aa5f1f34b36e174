"""The share coordinator's side of share groups (KIP-932; Kafka's SharePartition and share
coordinator): each share-partition's delivery state (share_partition.py), pure and driven with the
time given; the broker's share-partition manager (broker/coordinators/share_partitions.py) reads the
log for it, arms its locks and persists it in `__share_group_state`."""
