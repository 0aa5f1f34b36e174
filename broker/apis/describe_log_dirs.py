"""DescribeLogDirs (35): the one log directory (the data dir), its partitions' sizes and disk space.

As Kafka's ReplicaManager.describeLogDirs: a null topic list means every partition; partitions
asked for that do not exist are left out. OffsetLag is how far a future (being-moved) replica
trails the current one; with no replica moves it is 0 for every partition. TotalBytes and
UsableBytes (v4+) are the file system's, as Kafka reports them.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from ..network.router import RequestContext
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from ...protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

if TYPE_CHECKING:
    from ..services import BrokerServices

API_KEY = 35
VERSIONS = (0, 5)


def failed_response(_ctx: RequestContext, request: DescribeLogDirsRequest, error: int) -> DescribeLogDirsResponse:
    # Below v3 there is no top-level error: one result for the log directory carries it.
    return DescribeLogDirsResponse(error_code=error, results=[DescribeLogDirsResult(error_code=error)])


def _wanted(broker: BrokerServices, request: DescribeLogDirsRequest) -> dict[str, list[int]]:
    topics = broker.catalogue.topics()
    if request.topics is None:
        return {name: list(range(info.num_partitions)) for name, info in sorted(topics.items())}
    out: dict[str, list[int]] = {}
    for t in request.topics:
        info = topics.get(t.topic)
        if info is not None:
            out.setdefault(t.topic, []).extend(p for p in t.partitions if 0 <= p < info.num_partitions)
    return out


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    topics = []
    for name, partitions in _wanted(broker, request).items():
        parts = []
        for p in sorted(set(partitions)):
            size = broker.partitions.size(name, p)  # a dormant partition stays so (log/dormant.py)
            if size is not None:
                parts.append(DescribeLogDirsPartition(partition_index=p, partition_size=size,
                                                      offset_lag=0, is_future_key=False))
        if parts:
            topics.append(DescribeLogDirsTopic(name=name, partitions=parts))
    log_dir = str(broker.data_dir.resolve())
    usage = shutil.disk_usage(log_dir)
    result = DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=log_dir, topics=topics,
                                   total_bytes=usage.total, usable_bytes=usage.free)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
