"""The data pipeline: PySpark analytics over kbroker's logs (lag, commit rate, rebalances, topics)."""
