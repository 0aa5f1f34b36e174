"""Storage: the segment log engine (log/: segments, indexes, flusher, compaction, retention, topic
metadata files), idempotent producers' state and its snapshots, and the small state files (ACLs,
quotas, SCRAM credentials) rewritten whole. Every file-ism of the data directory lives here."""
