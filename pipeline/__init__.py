"""The data pipeline: PySpark analytics over kbroker\x27s logs (lag, commit rate, rebalances, topics)."""
