"""The storage engine over PostgreSQL (issue 44): several kbroker processes share one database, which
holds the cluster's metadata and the log itself. schema.py: the tables and the start-up checks."""
