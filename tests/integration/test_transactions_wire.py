"""The transaction APIs on the wire: error paths clients rarely show, the read_committed fetch
fields, UNSTABLE_OFFSET_COMMIT, KIP-890 verification, and the operator APIs."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.control_records import COMMIT, marker_of
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from kbroker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kbroker.protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from kbroker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kbroker.protocol.messages.end_txn_request import EndTxnRequest
from kbroker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kbroker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kbroker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kbroker.protocol.messages.list_transactions_request import ListTransactionsRequest
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kbroker.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kbroker.protocol.record_batch import Record, decode_batches, encode_batch
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.wire import Wire

E = ErrorCode
TOPIC = "txn-wire"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-wire") / "data", "--transaction-max-timeout-ms", "120000",
                         "--group-initial-rebalance-delay-ms", "0")
    w = Wire(proc.bootstrap)
    w.call(19, 5, CreateTopicsRequest(topics=[CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
                                      timeout_ms=10000))
    w.close()
    yield proc
    proc.stop()


@pytest.fixture
def wire(broker):
    w = Wire(broker.bootstrap)
    yield w
    w.close()


def init(wire: Wire, txn_id: str, timeout_ms: int = 60000):
    r = wire.call(22, 4, InitProducerIdRequest(txn_id, timeout_ms, -1, -1))
    assert r.error_code == E.NONE
    return r.producer_id, r.producer_epoch


def add(wire: Wire, txn_id: str, pid: int, epoch: int, parts, version: int = 3):
    topics = [AddPartitionsToTxnTopic(TOPIC, list(parts))]
    r = wire.call(24, version, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=topics))
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def produce(wire: Wire, txn_id: str, pid: int, epoch: int, seq: int, partition: int, values: list[bytes],
            version: int = 9):
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, v) for i, v in enumerate(values)], producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    r = wire.call(0, version, ProduceRequest(txn_id, -1, 5000, [TopicProduceData(TOPIC, partition_data=[
        PartitionProduceData(partition, batch)])]))
    return r.responses[0].partition_responses[0]


def end(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    return wire.call(26, 3, EndTxnRequest(txn_id, pid, epoch, commit)).error_code


def fetch(wire: Wire, partition: int, offset: int, isolation: int):
    r = wire.call(1, 11, FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=isolation, topics=[
        FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20)])]))
    return r.responses[0].partitions[0]


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_api_versions_advertise_the_transaction_apis(wire):
    r = wire.call(18, 3, ApiVersionsRequest("t", "1"))
    keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert keys[24] == (0, 5) and keys[25] == (0, 4) and keys[26] == (0, 5) and keys[28] == (0, 6)
    assert keys[61] == (0, 0) and keys[65] == (0, 0) and keys[66] == (0, 2) and keys[22] == (0, 5)
    # transactions v2 (KIP-890 part 2) finalized as Kafka 4.4 finalizes it
    r = wire.call(18, 4, ApiVersionsRequest("t", "1"))
    assert [(f.min_version, f.max_version) for f in r.supported_features if f.name == "transaction.version"] == [(0, 2)]
    assert [(f.min_version_level, f.max_version_level) for f in r.finalized_features
            if f.name == "transaction.version"] == [(2, 2)]


def test_add_partitions_errors_and_produce_verification(wire):
    pid, epoch = init(wire, "w-verify")
    # unknown partition: it gets UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED
    assert add(wire, "w-verify", pid, epoch, [0, 9]) == {(TOPIC, 0): E.OPERATION_NOT_ATTEMPTED,
                                                        (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    # KIP-890: a transactional batch for a partition not in the transaction is refused
    assert produce(wire, "w-verify", pid, epoch, 0, 0, [b"x"]).error_code == E.INVALID_TXN_STATE
    assert add(wire, "w-verify", pid, epoch, [0]) == {(TOPIC, 0): E.NONE}
    assert produce(wire, "w-verify", pid, epoch, 0, 0, [b"x"]).error_code == E.NONE
    assert produce(wire, "w-verify", pid, epoch, 1, 1, [b"y"]).error_code == E.INVALID_TXN_STATE
    # v4 verifyOnly, as a broker asks the coordinator
    r = wire.call(24, 4, AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        "w-verify", pid, epoch, True, [AddPartitionsToTxnTopic(TOPIC, [0, 1])])]))
    [result] = r.results_by_transaction
    assert {p.partition_index: p.partition_error_code for p in result.topic_results[0].results_by_partition} == {
        0: E.NONE, 1: E.TRANSACTION_ABORTABLE}
    # a wrong epoch is fenced, a wrong producer id is not this transaction's
    assert add(wire, "w-verify", pid, epoch + 1, [1]) == {(TOPIC, 1): E.PRODUCER_FENCED}
    assert add(wire, "w-verify", pid + 1000, epoch, [1]) == {(TOPIC, 1): E.INVALID_PRODUCER_ID_MAPPING}
    assert end(wire, "w-verify", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert end(wire, "w-verify", pid, epoch, False) == E.NONE
    # the timeout is bounded by transaction.max.timeout.ms
    r = wire.call(22, 4, InitProducerIdRequest("w-verify", 120001, -1, -1))
    assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_read_committed_fetch_lso_and_aborted_transactions(wire):
    pid, epoch = init(wire, "w-fetch")
    start = fetch(wire, 1, 0, 0).high_watermark
    assert add(wire, "w-fetch", pid, epoch, [1]) == {(TOPIC, 1): E.NONE}
    first = produce(wire, "w-fetch", pid, epoch, 0, 1, [b"a1", b"a2"]).base_offset
    assert first == start
    open_rc = fetch(wire, 1, start, 1)
    assert open_rc.last_stable_offset == start and open_rc.records in (b"", None)
    assert open_rc.high_watermark == start + 2
    lo = wire.call(2, 5, ListOffsetsRequest(-1, 1, [ListOffsetsTopic(TOPIC, [ListOffsetsPartition(1, -1, -1)])]))
    assert lo.topics[0].partitions[0].offset == start  # read_committed latest = LSO
    assert end(wire, "w-fetch", pid, epoch, False) == E.NONE
    # the abort marker follows the data; once durable the LSO moves past it
    done = wait_for(lambda: (lambda p: p if p.last_stable_offset == start + 3 else None)(fetch(wire, 1, start, 1)))
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, start)]
    batches = list(decode_batches(done.records))
    assert [h.is_control for h, _ in batches] == [False, True]
    assert marker_of(done.records, len(done.records) - batches[1][0].size)[0] != COMMIT
    assert fetch(wire, 1, start, 0).aborted_transactions is None  # read_uncommitted: null
    # a later fetch past the aborted range lists nothing
    assert fetch(wire, 1, start + 3, 1).aborted_transactions == []


def test_txn_offset_commit_is_unstable_until_commit(wire):
    pid, epoch = init(wire, "w-offsets")
    r = wire.call(25, 3, AddOffsetsToTxnRequest("w-offsets", pid, epoch, "w-group"))
    assert r.error_code == E.NONE
    r = wire.call(28, 3, TxnOffsetCommitRequest("w-offsets", "w-group", pid, epoch, -1, "", None, [
        TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(0, 42, -1, "meta")]),
        TxnOffsetCommitRequestTopic("no-such-topic", partitions=[TxnOffsetCommitRequestPartition(0, 1, -1, "")]),
    ]))
    errors = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errors == {(TOPIC, 0): E.NONE, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}

    def offset_fetch(stable: bool):
        r = wire.call(9, 7, OffsetFetchRequest("w-group", [OffsetFetchRequestTopic(TOPIC, [0])], require_stable=stable))
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert offset_fetch(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert offset_fetch(False) == (E.NONE, -1)  # not visible before the commit
    assert end(wire, "w-offsets", pid, epoch, True) == E.NONE
    assert wait_for(lambda: offset_fetch(True) == (E.NONE, 42))
    # a TxnOffsetCommit from a fenced epoch
    r = wire.call(28, 3, TxnOffsetCommitRequest("w-offsets", "w-group", pid, epoch + 5, -1, "", None, [
        TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(0, 50, -1, "")])]))
    assert r.topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH


def test_describe_and_list_transactions_and_describe_producers(wire):
    pid, epoch = init(wire, "w-ops")
    assert add(wire, "w-ops", pid, epoch, [0]) == {(TOPIC, 0): E.NONE}
    produce(wire, "w-ops", pid, epoch, 0, 0, [b"o"])
    r = wire.call(65, 0, DescribeTransactionsRequest(["w-ops", "w-missing"]))
    ops, missing = r.transaction_states
    assert (ops.error_code, ops.transaction_state, ops.producer_id, ops.producer_epoch) == (E.NONE, "Ongoing", pid, epoch)
    assert [(t.topic, t.partitions) for t in ops.topics] == [(TOPIC, [0])]
    assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    r = wire.call(66, 1, ListTransactionsRequest(["Ongoing", "Bogus"], [], -1))
    assert r.unknown_state_filters == ["Bogus"]
    assert "w-ops" in {t.transactional_id for t in r.transaction_states}
    assert all(t.transaction_state == "Ongoing" for t in r.transaction_states)
    r = wire.call(61, 0, DescribeProducersRequest([TopicRequest(TOPIC, [0])]))
    producers = {p.producer_id: p for p in r.topics[0].partitions[0].active_producers}
    assert producers[pid].current_txn_start_offset >= 0
    assert end(wire, "w-ops", pid, epoch, True) == E.NONE
    wait_for(lambda: wire.call(65, 0, DescribeTransactionsRequest(["w-ops"])).transaction_states[0]
             .transaction_state == "CompleteCommit")


def test_txn_offset_commit_checks_the_consumers_generation(wire):
    from kbroker.tests.integration.test_group_protocol_errors import join, sync

    joined = join(wire, "w-kip447")
    assert joined.error_code == E.NONE
    assert sync(wire, "w-kip447", joined.generation_id, joined.member_id, {joined.member_id: b""}).error_code == E.NONE
    pid, epoch = init(wire, "w-kip447")
    assert wire.call(25, 3, AddOffsetsToTxnRequest("w-kip447", pid, epoch, "w-kip447")).error_code == E.NONE

    def commit(generation: int, member: str, version: int = 3) -> int:
        r = wire.call(28, version, TxnOffsetCommitRequest("w-kip447", "w-kip447", pid, epoch, generation, member, None, [
            TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(1, 7, -1, "")])]))
        return r.topics[0].partitions[0].error_code

    assert commit(joined.generation_id + 1, joined.member_id) == E.ILLEGAL_GENERATION
    assert commit(joined.generation_id, "someone-else") == E.UNKNOWN_MEMBER_ID
    assert commit(joined.generation_id, joined.member_id) == E.NONE
    assert commit(-1, "") == E.NONE  # a producer that is not a member (EOS v1)
    assert commit(joined.generation_id + 1, joined.member_id, version=2) == E.NONE  # v2 carries no generation
    assert end(wire, "w-kip447", pid, epoch, False) == E.NONE


def test_read_committed_long_poll_waits_for_the_markers(broker, wire):
    pid, epoch = init(wire, "w-poll")
    start = fetch(wire, 0, 0, 0).high_watermark
    assert add(wire, "w-poll", pid, epoch, [0]) == {(TOPIC, 0): E.NONE}
    assert produce(wire, "w-poll", pid, epoch, 0, 0, [b"p1", b"p2"]).error_code == E.NONE
    poller = Wire(broker.bootstrap)
    try:
        # parked: the only data is past the LSO, so a read_committed fetch has nothing to return yet
        poller.send(1, 11, FetchRequest(max_wait_ms=20_000, min_bytes=1, isolation_level=1, topics=[
            FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=start,
                                                               partition_max_bytes=1 << 20)])]))
        time.sleep(0.3)
        ended = time.monotonic()
        assert end(wire, "w-poll", pid, epoch, True) == E.NONE
        answer = poller.receive(1, 11).responses[0].partitions[0]
        # woken by the markers, not by its 20 s max wait (a generous bound, not a speed check)
        assert time.monotonic() - ended < 15
        assert answer.last_stable_offset == start + 3
        values = [r.value for h, recs in decode_batches(answer.records) if not h.is_control for r in recs]
        assert values == [b"p1", b"p2"] and answer.aborted_transactions == []
    finally:
        poller.close()


def end_v5(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = wire.call(26, 5, EndTxnRequest(txn_id, pid, epoch, commit))
    return r.error_code, r.producer_id, r.producer_epoch


def test_transactions_v2_add_partitions_by_produce_and_bump_the_epoch_at_every_end(wire):
    """KIP-890 part 2 as a Java 4.x producer speaks it: no AddPartitionsToTxn nor AddOffsetsToTxn;
    Produce v12 and TxnOffsetCommit v5 add their partitions; EndTxn v5 answers the bumped epoch, the
    markers carry it, and the old epoch (a zombie, a late write) is refused."""
    pid, epoch = init(wire, "w-v2")
    start = fetch(wire, 0, 0, 0).high_watermark
    # Produce v12 adds the partition itself (v11 would have been refused: not in the transaction)
    assert produce(wire, "w-v2", pid, epoch, 0, 0, [b"v2-a"], version=11).error_code == E.TRANSACTION_ABORTABLE
    assert produce(wire, "w-v2", pid, epoch, 0, 0, [b"v2-a"], version=12).error_code == E.NONE
    r = wire.call(28, 5, TxnOffsetCommitRequest("w-v2", "w-v2-group", pid, epoch, -1, "", None, [
        TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(0, 9, -1, "")])]))
    assert r.topics[0].partitions[0].error_code == E.NONE  # its __consumer_offsets partition added too
    described = wire.call(65, 0, DescribeTransactionsRequest(["w-v2"])).transaction_states[0]
    assert (described.transaction_state, described.producer_epoch) == ("Ongoing", epoch)
    assert {t.topic for t in described.topics} == {TOPIC, "__consumer_offsets"}
    error, new_pid, new_epoch = end_v5(wire, "w-v2", pid, epoch, True)
    assert (error, new_pid, new_epoch) == (E.NONE, pid, epoch + 1)
    done = wait_for(lambda: (lambda p: p if p.last_stable_offset == start + 2 else None)(fetch(wire, 0, start, 1)))
    batches = list(decode_batches(done.records))
    assert [h.is_control for h, _ in batches] == [False, True]
    assert batches[1][0].producer_epoch == epoch + 1  # the commit marker carries the new epoch
    assert batches[0][1][0].value == b"v2-a" and done.aborted_transactions == []
    # the client's retry of its EndTxn (still at the old epoch) is answered as done
    assert end_v5(wire, "w-v2", pid, epoch, True) == (E.NONE, pid, epoch + 1)
    # a late write of the old epoch (a zombie) is fenced, by Produce and by TxnOffsetCommit
    late = produce(wire, "w-v2", pid, epoch, 1, 1, [b"late"], version=12)
    assert late.error_code == E.INVALID_PRODUCER_EPOCH
    r = wire.call(28, 5, TxnOffsetCommitRequest("w-v2", "w-v2-group", pid, epoch, -1, "", None, [
        TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(0, 10, -1, "")])]))
    assert r.topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
    assert wire.call(65, 0, DescribeTransactionsRequest(["w-v2"])).transaction_states[0].transaction_state \
        == "CompleteCommit"  # nothing of the zombie opened a transaction: nothing hangs
    # the next transaction at the new epoch, aborted: sequences start again at 0
    assert produce(wire, "w-v2", pid, epoch + 1, 0, 1, [b"v2-b"], version=12).error_code == E.NONE
    assert end_v5(wire, "w-v2", pid, epoch + 1, False) == (E.NONE, pid, epoch + 2)
    assert wire.call(28, 5, TxnOffsetCommitRequest("w-v2", "w-v2-group", pid, epoch + 5, -1, "", None, [
        TxnOffsetCommitRequestTopic(TOPIC, partitions=[TxnOffsetCommitRequestPartition(0, 11, -1, "")])])
    ).topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH


def test_end_txn_v4_keeps_the_epoch_beside_v2(wire):
    """A transactions v1 client (EndTxn v4, AddPartitionsToTxn v3) still works on a v2 broker."""
    pid, epoch = init(wire, "w-v1")
    assert add(wire, "w-v1", pid, epoch, [1]) == {(TOPIC, 1): E.NONE}
    assert produce(wire, "w-v1", pid, epoch, 0, 1, [b"v1"]).error_code == E.NONE
    r = wire.call(26, 4, EndTxnRequest("w-v1", pid, epoch, True))
    assert r.error_code == E.NONE
    wait_for(lambda: wire.call(65, 0, DescribeTransactionsRequest(["w-v1"])).transaction_states[0]
             .transaction_state == "CompleteCommit")
    assert wire.call(65, 0, DescribeTransactionsRequest(["w-v1"])).transaction_states[0].producer_epoch == epoch
    assert add(wire, "w-v1", pid, epoch, [1]) == {(TOPIC, 1): E.NONE}
    assert end(wire, "w-v1", pid, epoch, False) == E.NONE


def test_write_txn_markers_aborts_a_transaction_from_outside(wire):
    """WriteTxnMarkers (27), as `kafka-transactions abort` sends it for a hanging transaction: the abort
    marker is written at the producer's epoch and the partition's LSO moves past the transaction; a
    marker older than the producer's epoch is refused; an unknown partition is named."""
    from kbroker.protocol.messages.write_txn_markers_request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    pid, epoch = init(wire, "w-markers")
    start = fetch(wire, 1, 0, 0).high_watermark
    assert produce(wire, "w-markers", pid, epoch, 0, 1, [b"hang"], version=12).error_code == E.NONE
    assert fetch(wire, 1, start, 1).last_stable_offset == start  # held open by the transaction

    def markers(producer_epoch: int, partitions: list[int], version: int = 2, tv: int = 0) -> dict[int, int]:
        r = wire.call(27, version, WriteTxnMarkersRequest([WritableTxnMarker(
            pid, producer_epoch, False, [WritableTxnMarkerTopic(TOPIC, partitions)], 0, tv)]))
        [result] = r.markers
        assert result.producer_id == pid
        return {p.partition_index: p.error_code for t in result.topics for p in t.partitions}

    # a transactions v2 marker carries the bumped epoch: at the open transaction's own epoch it is refused
    assert markers(epoch, [1], tv=2) == {1: E.INVALID_PRODUCER_EPOCH}
    # Admin.abortTransaction's marker (transaction version 0) at the producer's epoch
    assert markers(epoch, [1, 99]) == {1: E.NONE, 99: E.UNKNOWN_TOPIC_OR_PARTITION}
    done = fetch(wire, 1, start, 1)
    assert done.last_stable_offset == start + 2  # the record and the abort marker
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, start)]
    assert markers(epoch, [1], version=0) == {1: E.NONE}  # v0, as Kafka 3.x's tools send it: written again
    if epoch > 0:
        assert markers(epoch - 1, [1]) == {1: E.INVALID_PRODUCER_EPOCH}
    # the coordinator still ends the transaction it knows (its markers are idempotent)
    assert end_v5(wire, "w-markers", pid, epoch, False) == (E.NONE, pid, epoch + 1)
    wait_for(lambda: wire.call(65, 0, DescribeTransactionsRequest(["w-markers"])).transaction_states[0]
             .transaction_state == "CompleteAbort")
    assert markers(epoch, [1]) == {1: E.INVALID_PRODUCER_EPOCH}  # now older than the producer's
