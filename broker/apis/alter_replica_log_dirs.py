"""AlterReplicaLogDirs (34): move replicas between the broker's log directories (kafka-reassign-partitions.sh
--reassignment-json-file with "log_dirs", Admin.alterReplicaLogDirs).

kbroker has one log directory, the data dir, so every replica already is where it may go. As Kafka's
ReplicaManager.alterReplicaLogDirs answers per partition: NONE when the destination is the data dir (the
replica is already there: nothing moves), LOG_DIR_NOT_FOUND for any other path (not among the broker's
log dirs), UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does not have, INVALID_TOPIC_EXCEPTION
for a topic whose future-replica directory name would pass 255 bytes (KAFKA-4893). Kafka compares
`new File(path).getAbsolutePath`, so a relative path is taken from the broker's working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from ...protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

API_KEY = 34
VERSIONS = (0, 2)
# UnifiedLog.logFutureDirName: "<topic>-<partition>.<32 hex digits>-future"
_FUTURE_DIR_EXTRA = 1 + 32 + len("-future")


def failed_response(_ctx: RequestContext, request: AlterReplicaLogDirsRequest, error: int
                    ) -> AlterReplicaLogDirsResponse:
    return _response({(t.name, p): error for d in request.dirs for t in d.topics for p in t.partitions})


def _response(results: dict[tuple[str, int], int]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(AlterReplicaLogDirPartitionResult(partition, error))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirTopicResult(topic_name=topic, partitions=parts) for topic, parts in by_topic.items()])


def _absolute(path: str) -> str:
    """java.io.File's absolute path: joined to the working directory, separators tidied, `..` kept."""
    return os.path.normpath(path) if path.startswith("/") else os.path.normpath(os.path.join(os.getcwd(), path))


async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    broker = ctx.broker
    data_dir: Path = broker.data_dir
    ours = {str(data_dir.absolute()), str(data_dir.resolve())}
    destination: dict[tuple[str, int], str] = {}
    for d in request.dirs:  # Kafka keeps the last directory named for a partition
        for t in d.topics:
            for p in t.partitions:
                destination[(t.name, p)] = d.path
    results: dict[tuple[str, int], int] = {}
    for (topic, partition), path in destination.items():
        if len(f"{topic}-{partition}".encode()) + _FUTURE_DIR_EXTRA > 255:
            results[(topic, partition)] = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif _absolute(path) not in ours:
            results[(topic, partition)] = ErrorCode.LOG_DIR_NOT_FOUND
        elif not broker.catalogue.has_partition(topic, partition):
            results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            results[(topic, partition)] = ErrorCode.NONE
    return _response(results)
