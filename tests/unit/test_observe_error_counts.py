"""Error answers are counted at every level of a response, as Kafka's ErrorsPerSec counts them."""

from __future__ import annotations

from kbroker.broker.operations.observe import Observations
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.heartbeat_response import HeartbeatResponse
from kbroker.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)


def test_top_level_and_per_partition_codes_are_counted_and_successes_are_not() -> None:
    obs = Observations()
    obs.answer(12, HeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR))
    obs.answer(12, HeartbeatResponse(error_code=ErrorCode.NONE))
    obs.answer(8, OffsetCommitResponse(topics=[OffsetCommitResponseTopic(name="t", partitions=[
        OffsetCommitResponsePartition(0, ErrorCode.NOT_COORDINATOR),
        OffsetCommitResponsePartition(1, ErrorCode.NOT_COORDINATOR),
        OffsetCommitResponsePartition(2, ErrorCode.NONE)])]))
    assert dict(obs.error_answers) == {(12, ErrorCode.NOT_COORDINATOR): 1, (8, ErrorCode.NOT_COORDINATOR): 2}
