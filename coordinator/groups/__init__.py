"""Group semantics as pure state machines: what goes in (commands.py) and comes out (results.py),
the group types a partition's shard holds (group_types.py), each group's rebalance history
(history.py), and one folder per group type: classic/ (the classic protocol, and today the shard
that hosts every group of a partition) and consumer/ (KIP-848)."""
