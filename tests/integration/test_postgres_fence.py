"""A node that fences itself by its own clock and is not moved (issue 44), the only node of its cluster,
so nothing moves its partitions (its own controller does nothing while fenced). Another session holds
rows the node needs, as a database too slow to answer would:

* the `__consumer_offsets` row of a group's partition, so the round writing a first OffsetCommit waits,
  and a second OffsetCommit, which arrives meanwhile, is held for the round after (offsets_topic.py);
* the node's `brokers` row, so its lease's renewals wait past the lease: the node fences itself.

The first row is let go once the node has fenced itself: the round commits, and the held commit is
written while the node is fenced, which is refused, and the coordinator takes the partition offline.
Then the second, once that write was refused: the renewal goes through and the fence lifts, with no
move. Each step waits for the one before it: the rows are held by sessions the test ends, not for a
time (under load a psql started late, or a fence came late, and the steps crossed). The group is served
again (the coordinator partitions reloaded when the fence lifts; before, they stayed offline,
NOT_COORDINATOR to every request, as the zombie test once saw of a node resumed before the controller
moved it) and its offsets are those of the first commit."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.coordinator.partitioning import partition_for
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_commit_request import (OffsetCommitRequest, OffsetCommitRequestPartition,
                                                              OffsetCommitRequestTopic)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.tests.integration.postgres import RowHold
from kbroker.tests.integration.test_postgres_nodes import start_node, wait_for
from kbroker.tests.integration.wire import Wire


def waiting_on_partitions(postgres, database: str) -> int:
    """Sessions of the node waiting for a row lock of the partitions table (an append's round)."""
    return int(postgres.psql("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                             "WHERE NOT l.granted AND a.pid <> pg_backend_pid() "
                             "AND a.query LIKE '%UPDATE partitions%'", database))


def commit(bootstrap: str, group: str, offset: int) -> int:
    wire = Wire(bootstrap, timeout=60)
    try:
        response = wire.call(8, 8, OffsetCommitRequest(group, -1, "", None, -1, [
            OffsetCommitRequestTopic("data", partitions=[OffsetCommitRequestPartition(0, offset)])]))
    finally:
        wire.close()
    return response.topics[0].partitions[0].error_code


def committed(bootstrap: str, group: str) -> tuple[int, int]:
    wire = Wire(bootstrap)
    try:
        response = wire.call(9, 7, OffsetFetchRequest(group, [OffsetFetchRequestTopic("data", [0])]))
    finally:
        wire.close()
    if response.error_code != ErrorCode.NONE:
        return response.error_code, -1
    return response.topics[0].partitions[0].error_code, response.topics[0].partitions[0].committed_offset


def test_a_node_fenced_but_not_moved_serves_its_groups_again_when_the_fence_lifts(postgres, tmp_path, capsys):
    database = postgres.create_database()
    node = start_node(tmp_path / "node1", postgres.url(database), 1)
    holds: list[RowHold] = []
    try:
        group = f"g-{uuid.uuid4().hex[:6]}"
        partition = partition_for(group, 50)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("data", 1, 1)])["data"].result(30)
        wait_for(lambda: committed(node.bootstrap, group)[0] == ErrorCode.NONE, "the topic is known")
        assert commit(node.bootstrap, group, 5) == ErrorCode.NONE
        offsets_row = postgres.hold(database, "SELECT 1 FROM partitions WHERE topic = '__consumer_offsets' "
                                              f"AND partition = {partition}")
        holds.append(offsets_row)
        answers: dict[int, int] = {}
        commits = [threading.Thread(target=lambda o=o: answers.__setitem__(o, commit(node.bootstrap, group, o)))
                   for o in (10, 11)]
        commits[0].start()
        wait_for(lambda: waiting_on_partitions(postgres, database) > 0, "the first commit's round waits", timeout=30)
        commits[1].start()  # held behind the round in progress
        brokers_row = postgres.hold(database, "SELECT 1 FROM brokers WHERE node_id = 1")  # the lease runs out
        holds.append(brokers_row)
        wait_for(lambda: node.events("broker_fenced"), "the node fences itself", timeout=30)
        offsets_row.release()  # the round commits; the held commit is written while fenced: refused
        wait_for(lambda: node.events("offsets_append_failed"), "the held commit is refused", timeout=30)
        brokers_row.release()  # the renewal goes through
        for thread in commits:
            thread.join(60)
        wait_for(lambda: node.events("broker_unfenced"), "the fence lifts", timeout=30)
        lifted = time.monotonic()
        wait_for(lambda: commit(node.bootstrap, group, 20) == ErrorCode.NONE, "a commit is served again", timeout=30)
        served_s = round(time.monotonic() - lifted, 2)
        offset = committed(node.bootstrap, group)
    finally:
        for hold in holds:
            hold.release()
        node.kill()
    refused = node.events("offsets_append_failed")
    with capsys.disabled():
        print(f"\n[postgres node fenced, not moved] answers while fenced: "
              f"{ {o: ErrorCode(c).name for o, c in answers.items()} }; held writes refused: {len(refused)}; "
              f"commits served again {served_s} s after the fence lifted")
    assert node.events("broker_fenced") and refused  # the scenario happened: a write refused while fenced
    assert answers[10] == ErrorCode.NONE and answers[11] != ErrorCode.NONE
    assert offset == (ErrorCode.NONE, 20)
    assert not node.events("leader_moved")  # nothing moved: the reload came from the fence lifting
