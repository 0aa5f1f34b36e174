"""The partition data path above storage: what a read may return under each isolation level, the
transaction markers appended to partitions, and the topics created at start-up. The home of the
partition service and the topic catalogue (issue 39, items 2 and 3)."""
