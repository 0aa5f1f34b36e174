"""kbroker: a Kafka-protocol broker with Kafka's consumer-group coordinator at its heart.

The repository root is this package: `protocol/`, `broker/`, `coordinator/` and `purgatory/`
install as `kbroker.protocol`, `kbroker.broker`, ... (see pyproject.toml's package-dir).
"""

__version__ = "0.1.0"
