"""The group coordinator is built with its first use (broker/app.py): a broker with nothing stored in
`__consumer_offsets` does not import it at start-up, answers the first group request at once (not
COORDINATOR_LOAD_IN_PROGRESS), and a restart on stored groups replays them as before. Real
`kbroker serve` processes over real sockets."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kbroker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

pytestmark = pytest.mark.timeout(120)

FIND_COORDINATOR, JOIN, OFFSET_COMMIT, OFFSET_FETCH = 10, 11, 8, 9


def commit(wire: Wire, group: str, offset: int) -> int:
    response = wire.call(OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                         committed_metadata="")])]))
    return response.topics[0].partitions[0].error_code


def fetched(wire: Wire, group: str) -> tuple[int, int | None]:
    """(the group's error, its committed offset of t-0); a group-level error (COORDINATOR_LOAD_IN_PROGRESS
    while a restart replays) lists no topics, as in Kafka, so there is no offset to read."""
    response = wire.call(OFFSET_FETCH, 7, OffsetFetchRequest(
        group_id=group, topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0])], require_stable=False))
    if response.error_code != E.NONE:
        return response.error_code, None
    return response.error_code, response.topics[0].partitions[0].committed_offset


def test_nothing_stored_first_group_request_answered_at_once_and_restart_replays(tmp_path):
    broker = BrokerProcess(tmp_path / "data", "--create-topics", "t:1")  # a first start: waits for offsets_loaded
    try:
        [loaded] = broker.events("offsets_loaded")
        assert loaded["records"] == 0
        wire = Wire(broker.bootstrap)
        try:
            found = wire.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
            assert found.error_code == E.NONE and found.port == int(broker.bootstrap.rsplit(":", 1)[1])
            joined = wire.call(JOIN, 5, JoinGroupRequest(
                group_id="joiner", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol("range", b"")]))
            assert joined.error_code == E.MEMBER_ID_REQUIRED  # served, not COORDINATOR_LOAD_IN_PROGRESS
            assert commit(wire, "g", 42) == E.NONE
            assert fetched(wire, "g") == (E.NONE, 42)
        finally:
            wire.close()
        broker.restart()
        wire = Wire(broker.bootstrap)
        try:
            deadline = time.monotonic() + 30
            while (answer := fetched(wire, "g"))[0] == E.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline, "the stored group was never loaded"
                time.sleep(0.05)
            assert answer == (E.NONE, 42)
        finally:
            wire.close()
        # The group's own partition answers first; offsets_loaded is logged once all 50 have loaded.
        deadline = time.monotonic() + 30
        while not (loaded_again := broker.events("offsets_loaded", 2)):
            assert time.monotonic() < deadline, "offsets_loaded was never logged after the restart"
            time.sleep(0.05)
        assert loaded_again[0]["records"] >= 1
    finally:
        broker.stop()
