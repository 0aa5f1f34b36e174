"""The append-only partitioned log: Kafka's log layout and semantics, simplified for one node."""

from .config import FlushPolicy, LogConfig
from ....protocol.topic_names import validate_topic_name
from .manager import LogManager
from .topic_files import TopicInfo
from .partition_log import AppendInfo, PartitionLog, ReadResult

__all__ = [
    "AppendInfo",
    "FlushPolicy",
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "ReadResult",
    "TopicInfo",
    "validate_topic_name",
]
