"""A deleted topic's offsets go with it (Kafka's OffsetMetadataManager.onTopicsDeleted): the shard's
command, the service's sweep over every loaded group, and the replay of `__consumer_offsets` where a
tombstone ends what an open transaction held of its key (Kafka's replay clears the key's pending
transactional offsets)."""

from __future__ import annotations

from kbroker.coordinator.groups import commands as c
from kbroker.coordinator.groups.results import OffsetDeleteResult, OffsetFetchPartition, PartitionError, TopicErrors
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records.classic_records import OffsetCommitRecord, OffsetCommitTombstone
from kbroker.tests.coordinator_harness import Harness
from kbroker.tests.unit.test_coordinator_actor import make_service
from kbroker.tests.unit.test_coordinator_offsets import commit, fetch

E = ErrorCode


def test_the_deleted_topics_offsets_are_tombstoned_and_the_others_kept() -> None:
    h = Harness()
    h.call(commit("g", -1, "", ("gone", 0, 5), ("gone", 2, 7), ("kept", 0, 9)))
    before = len(h.log)
    result = h.call(c.DeleteTopicOffsets("g", frozenset({"gone"})))
    assert result == OffsetDeleteResult(E.NONE, (TopicErrors("gone", (PartitionError(0, E.NONE),
                                                                        PartitionError(2, E.NONE))),))
    assert h.log[before:] == [OffsetCommitTombstone("g", "gone", 0), OffsetCommitTombstone("g", "gone", 2)]
    assert fetch(h, "g", "gone", 0, 2) == [OffsetFetchPartition(0), OffsetFetchPartition(2)]
    assert fetch(h, "g", "kept", 0)[0].offset == 9
    assert h.group("g") is not None  # the group stays (retention removes an empty one later, as in Kafka)


def test_pending_transactional_offsets_are_tombstoned_too_and_nothing_is_written_for_none() -> None:
    h = Harness()
    h.call(commit("g", -1, "", ("gone", 0, 5)))
    before = len(h.log)
    h.call(c.DeleteTopicOffsets("g", frozenset({"gone"}), pending=(("gone", 0), ("gone", 3), ("other", 1))))
    # the committed one and the pending one of the deleted topic, once each; another topic's never
    assert h.log[before:] == [OffsetCommitTombstone("g", "gone", 0), OffsetCommitTombstone("g", "gone", 3)]
    before = len(h.log)
    result = h.call(c.DeleteTopicOffsets("g", frozenset({"gone"})))
    assert result.error is E.NONE and h.log[before:] == []


def test_delete_group_tombstones_the_partitions_open_transactions_hold_for_it_too() -> None:
    """Kafka's deleteAllOffsets: a tombstone per committed offset, and per partition with only a
    pending transactional offset (the broker passes those, held by its transaction coordinator)."""
    h = Harness()
    h.call(commit("g", -1, "", ("t", 0, 5)))
    before = len(h.log)
    assert h.call(c.DeleteGroup("g", pending=(("t", 0), ("t", 1)))).error is E.NONE
    assert [r for r in h.log[before:] if isinstance(r, OffsetCommitTombstone)] == [
        OffsetCommitTombstone("g", "t", 0), OffsetCommitTombstone("g", "t", 1)]
    assert h.group("g") is None


async def test_the_service_sweeps_every_loaded_group_with_offsets_of_the_deleted_topics() -> None:
    groups = ("a", "b", "c", "d")
    service, _, log = await make_service(groups=groups)
    for group in ("a", "b", "c"):
        await service.commit_offsets(commit(group, -1, "", ("gone", 0, 1), ("kept", 0, 2)))
    await service.commit_offsets(commit("d", -1, "", ("kept", 1, 3)))
    tombstones = await service.delete_topic_offsets(["gone"], pending={"d": {("gone", 4)}})
    assert tombstones == 4
    assert sorted((r.group, r.topic, r.partition) for r in log.all() if isinstance(r, OffsetCommitTombstone)) == [
        ("a", "gone", 0), ("b", "gone", 0), ("c", "gone", 0), ("d", "gone", 4)]
    for group in groups:
        assert ("gone", 0) not in service.offsets_of(group)
    assert service.offsets_of("a")[("kept", 0)].offset == 2
    assert await service.delete_topic_offsets(["gone"]) == 0  # nothing left: nothing written
    await service.stop()


async def test_a_commit_sent_after_the_deletion_is_kept() -> None:
    """The tombstones are dispatched in the deletion's turn: a commit to the topic created again
    under its name, sent after it, lands after them and stays."""
    service, _, log = await make_service(groups=("g",))
    await service.commit_offsets(commit("g", -1, "", ("t", 0, 1)))
    deleted = service.delete_topic_offsets(["t"])
    committed = service.commit_offsets(commit("g", -1, "", ("t", 0, 42)))
    assert await deleted == 1
    assert (await committed).topics[0].partitions[0].error is E.NONE
    assert service.offsets_of("g")[("t", 0)].offset == 42
    assert [type(r).__name__ for r in log.all()] == ["OffsetCommitRecord", "OffsetCommitTombstone",
                                                     "OffsetCommitRecord"]
    await service.stop()


def test_a_tombstone_ends_what_an_open_transaction_holds_of_its_key_in_the_replay(tmp_path) -> None:
    from kbroker.broker.coordinators.offsets_topic import TOPIC, OffsetsTopic
    from kbroker.broker.partitions.service import PartitionService
    from kbroker.broker.storage.log.manager import LogManager
    from kbroker.protocol.control_records import encode_marker
    from kbroker.protocol.record_batch import Record as LogRecord
    from kbroker.protocol.record_batch import encode_batch
    from kbroker.protocol.records.codec import encode_record

    logs = LogManager(tmp_path, flush_policy="never")
    topic = OffsetsTopic(PartitionService.offline(logs), 50)
    topic.ensure()
    plog = logs.get_log(TOPIC, 3)

    def append(records, **kw) -> None:
        plog.append(encode_batch([LogRecord(i, 5, *encode_record(r)) for i, r in enumerate(records)], **kw),
                    leader_epoch=0, now_ms=0)

    txn = {"producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
    append([OffsetCommitRecord("g", "gone", 0, 10, -1, "", 5), OffsetCommitRecord("g", "kept", 0, 11, -1, "", 5)],
           producer_id=1, **txn)
    append([OffsetCommitRecord("g", "gone", 1, 12, -1, "", 5)], producer_id=2, **txn)  # open at the "crash"
    append([OffsetCommitTombstone("g", "gone", 0), OffsetCommitTombstone("g", "gone", 1)])  # the topic deleted
    plog.append(encode_marker(1, 0, True, 0, 5), leader_epoch=0, now_ms=0, control=True)
    replay = topic.read_partition(3)
    live = [(r.topic, r.partition, getattr(r, "offset", None)) for r in replay.records]
    # the committed transaction brings back its offset of the kept topic only
    assert ("kept", 0, 11) in live and ("gone", 0, 10) not in live
    assert not [r for r in topic.open_txn_offsets[3].get(2, []) if r.topic == "gone"]
    logs.close()
