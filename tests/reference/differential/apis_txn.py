"""Checks of the producer-id and transaction APIs, every common version: InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions,
ListTransactions, and an idempotent producer's Produce (sequence numbers). Every check uses a
transactional id of its own; the transactions are begun as transactions v1 (AddPartitionsToTxn v3) and
ended by each EndTxn version (v5 ends them as transactions v2: the epoch bumped). What
they add to a transaction is dw-scratch's or a topic of their own: a transaction left open is aborted
when it times out, and its markers must not move dw-data under the checks that read it.
"""

from __future__ import annotations

from typing import Any

from .apis_data import DATA, SCRATCH
from .craft import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
    batch,
    create_topic,
    make,
    unique,
)
from .runner import Check, Session
from .versions import sweep

TIMEOUT_MS = 60_000


class Producer:
    """A transactional (or idempotent) producer's ids, as InitProducerId gave them."""

    def __init__(self, s: Session, transactional_id: str | None, topic: str = SCRATCH) -> None:
        self.s, self.transactional_id, self.topic = s, transactional_id, topic
        self.producer_id, self.epoch = -1, -1
        self.sequence = 0

    async def init(self, version: int = 4, timeout_ms: int = TIMEOUT_MS, label: str = "init", *,
                   keep_ids: bool = False) -> Any:
        response = await self.s.call(INIT_PRODUCER_ID, version, make(
            INIT_PRODUCER_ID, transactional_id=self.transactional_id, transaction_timeout_ms=timeout_ms,
            producer_id=self.producer_id if keep_ids else -1, producer_epoch=self.epoch if keep_ids else -1), label)
        if response is not None and response.error_code == 0:
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        return response

    async def add_partitions(self, version: int = 3, topic: str | None = None, partitions: tuple[int, ...] = (0,),
                             label: str = "add partitions", epoch: int | None = None,
                             producer_id: int | None = None) -> Any:
        pid = self.producer_id if producer_id is None else producer_id
        ep = self.epoch if epoch is None else epoch
        topics = [{"name": topic or self.topic, "partitions": list(partitions)}]
        return await self.s.call(ADD_PARTITIONS_TO_TXN, version, make(
            ADD_PARTITIONS_TO_TXN, v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=ep, v3_and_below_topics=topics, transactions=[{
                "transactional_id": self.transactional_id, "producer_id": pid, "producer_epoch": ep,
                "verify_only": False, "topics": topics}]), label)

    async def produce(self, partition: int = 0, label: str = "produce", version: int = 9, **batch_args: Any) -> Any:
        records = batch("t1", "t2", producer_id=self.producer_id, producer_epoch=self.epoch,
                        base_sequence=self.sequence, transactional=self.transactional_id is not None, **batch_args)
        self.sequence += 2
        return await self.s.call(PRODUCE, version, make(
            PRODUCE, transactional_id=self.transactional_id, acks=-1, timeout_ms=30000,
            topic_data=[{"name": self.topic, "partition_data": [{"index": partition, "records": records}]}]), label)

    async def add_offsets(self, group: str, version: int = 3, label: str = "add offsets") -> Any:
        return await self.s.call(ADD_OFFSETS_TO_TXN, version, make(
            ADD_OFFSETS_TO_TXN, transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.epoch, group_id=group), label)

    async def commit_offsets(self, group: str, version: int = 3, label: str = "txn offset commit",
                             generation: int = -1, member_id: str = "") -> Any:
        return await self.s.call(TXN_OFFSET_COMMIT, version, make(
            TXN_OFFSET_COMMIT, transactional_id=self.transactional_id, group_id=group, producer_id=self.producer_id,
            producer_epoch=self.epoch, generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[{"name": DATA, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                   "committed_metadata": "tx"}]}]), label)

    async def completed(self) -> Any:
        """DescribeTransactions until the markers are written (Kafka writes them after it answers
        EndTxn; a retried EndTxn before that is CONCURRENT_TRANSACTIONS on both)."""
        return await self.s.call_until(
            lambda r: r.transaction_states[0].transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"),
            DESCRIBE_TRANSACTIONS, 0, make(DESCRIBE_TRANSACTIONS, transactional_ids=[self.transactional_id]),
            "described once completed", tries=200)

    async def end(self, committed: bool, version: int = 3, label: str | None = None, epoch: int | None = None) -> Any:
        return await self.s.call(END_TXN, version, make(
            END_TXN, transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.epoch if epoch is None else epoch, committed=committed),
            label or ("commit" if committed else "abort"))


def init_producer_id_checks() -> list[Check]:
    async def idempotent(s: Session, v: int) -> None:
        await Producer(s, None).init(v, timeout_ms=-1)

    async def transactional(s: Session, v: int) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init(v)
        await producer.init(v, label="init again")

    async def bump(s: Session, v: int) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init(v)
        await producer.init(v, label="init with its ids", keep_ids=True)
        producer.epoch += 5
        await producer.init(v, label="init with an epoch from the future", keep_ids=True)

    return [
        *sweep(INIT_PRODUCER_ID, "an idempotent producer", steps=idempotent),
        *sweep(INIT_PRODUCER_ID, "a transactional id, twice", steps=transactional),
        *sweep(INIT_PRODUCER_ID, "a producer that gives its ids", steps=bump, versions=range(3, 6)),
        *sweep(INIT_PRODUCER_ID, "a transaction timeout past the maximum", lambda s, v: make(
            INIT_PRODUCER_ID, transactional_id=unique(s, "dw"), transaction_timeout_ms=3_600_000)),
        *sweep(INIT_PRODUCER_ID, "an empty transactional id", lambda s, v: make(
            INIT_PRODUCER_ID, transactional_id="", transaction_timeout_ms=TIMEOUT_MS)),
    ]


def transaction_checks() -> list[Check]:
    async def add_partitions(s: Session, v: int, case: str) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init()
        if case == "ok":
            await producer.add_partitions(v, partitions=(0, 1))
            await producer.add_partitions(v, partitions=(0,), label="add again")
        elif case == "unknown topic":
            await producer.add_partitions(v, topic="dw-nope-txn")
        elif case == "old epoch":
            await producer.add_partitions(v, epoch=producer.epoch - 1 if producer.epoch > 0 else 7)
        elif case == "unknown producer":
            await producer.add_partitions(v, producer_id=producer.producer_id + 1000)

    async def add_offsets(s: Session, v: int, case: str) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init()
        if case == "unknown producer":
            producer.producer_id += 1000
        await producer.add_offsets(unique(s, "dw-group"), v)

    async def end(s: Session, v: int, case: str) -> None:
        producer = Producer(s, unique(s, "dw"), unique(s, "dw"))
        await producer.init()
        if case in ("commit", "abort"):
            await create_topic(s, producer.topic)
            await producer.add_partitions(3)
            await producer.produce()
            await producer.end(case == "commit", v)
            await producer.completed()
            await producer.end(case == "commit", v, label="again, once completed")
        elif case == "nothing to end":
            await producer.end(True, v)
        elif case == "old epoch":
            await producer.add_partitions(3)
            await producer.end(True, v, epoch=producer.epoch + 3)

    async def txn_offset_commit(s: Session, v: int, case: str) -> None:
        producer = Producer(s, unique(s, "dw"))
        group = unique(s, "dw-group")
        await producer.init()
        if case != "without AddOffsetsToTxn":
            await producer.add_offsets(group)
        if case == "a generation of an unknown group":
            await producer.commit_offsets(group, v, generation=3, member_id="dw-ghost")
        else:
            await producer.commit_offsets(group, v)
        if case == "committed":
            await producer.end(True)

    return [
        *sweep(ADD_PARTITIONS_TO_TXN, "two partitions, then one again", steps=lambda s, v: add_partitions(s, v, "ok")),
        *sweep(ADD_PARTITIONS_TO_TXN, "unknown topic", steps=lambda s, v: add_partitions(s, v, "unknown topic")),
        *sweep(ADD_PARTITIONS_TO_TXN, "an epoch from the future", steps=lambda s, v: add_partitions(s, v, "old epoch")),
        *sweep(ADD_PARTITIONS_TO_TXN, "unknown producer id", steps=lambda s, v: add_partitions(s, v, "unknown producer")),
        *sweep(ADD_OFFSETS_TO_TXN, "a group", steps=lambda s, v: add_offsets(s, v, "ok")),
        *sweep(ADD_OFFSETS_TO_TXN, "unknown producer id", steps=lambda s, v: add_offsets(s, v, "unknown producer")),
        *sweep(END_TXN, "commit", steps=lambda s, v: end(s, v, "commit")),
        *sweep(END_TXN, "abort", steps=lambda s, v: end(s, v, "abort")),
        *sweep(END_TXN, "no transaction to end", steps=lambda s, v: end(s, v, "nothing to end")),
        *sweep(END_TXN, "an epoch from the future", steps=lambda s, v: end(s, v, "old epoch")),
        *sweep(TXN_OFFSET_COMMIT, "committed with the transaction", steps=lambda s, v: txn_offset_commit(
            s, v, "committed")),
        # Serial, as Produce's "outside its transaction" checks (outside_checks)
        *sweep(TXN_OFFSET_COMMIT, "without AddOffsetsToTxn", steps=lambda s, v: txn_offset_commit(
            s, v, "without AddOffsetsToTxn"), serial=True),
        *sweep(TXN_OFFSET_COMMIT, "a generation of an unknown group", steps=lambda s, v: txn_offset_commit(
            s, v, "a generation of an unknown group"), versions=range(3, 5)),
    ]


def marker_checks() -> list[Check]:
    """WriteTxnMarkers as `kafka-transactions abort` sends it: an abort marker for an open transaction
    of a topic of its own (and a partition that does not exist), then the same marker again, and one
    at an epoch older than the producer's; before them a transactions v2 marker (not newer: refused)."""
    async def abort(s: Session, v: int) -> None:
        producer = Producer(s, unique(s, "dw"), unique(s, "dw"))
        await create_topic(s, producer.topic)
        await producer.init()
        await producer.add_partitions(3)
        await producer.produce()

        async def markers(epoch: int, partitions: list[int], label: str, tv: int = 0) -> None:
            await s.call(WRITE_TXN_MARKERS, v, make(WRITE_TXN_MARKERS, markers=[{
                "producer_id": producer.producer_id, "producer_epoch": epoch, "transaction_result": False,
                "topics": [{"name": producer.topic, "partition_indexes": partitions}], "coordinator_epoch": 0,
                "transaction_version": tv}]), label)

        # v2 carries a transaction version: 2 must be newer than the open transaction's epoch
        await markers(producer.epoch, [0], "a transactions v2 marker at the transaction's own epoch", tv=2)
        await markers(producer.epoch, [0, 7], "abort marker")
        await markers(producer.epoch, [0], "the same marker again")
        await producer.end(False, 5, label="the coordinator ends it (v2: the epoch bumped)")
        await producer.completed()
        await markers(producer.epoch, [0], "a marker older than the producer's epoch")

    return sweep(WRITE_TXN_MARKERS, "abort an open transaction from outside", steps=abort)


def outside_checks() -> list[Check]:
    """KIP-890's verification: a transactional batch to a partition its transaction does not hold."""
    from .apis_data import _produce
    from .craft import topic_id

    async def outside(s: Session, v: int) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init()
        records = batch("t", producer_id=producer.producer_id, producer_epoch=producer.epoch, base_sequence=0,
                        transactional=True)
        body = _produce(v, SCRATCH, await topic_id(s, SCRATCH), 0, records)
        body.transactional_id = producer.transactional_id
        await s.call(PRODUCE, v, body, "produce outside the transaction")

    # Serial: Kafka verifies the batches of concurrent Produce requests in one AddPartitionsToTxn to its
    # coordinator, whose error mapping follows one of their versions, not each request's own.
    return sweep(PRODUCE, "a transactional batch outside its transaction", steps=outside, versions=range(3, 14),
                 serial=True)


def describe_checks() -> list[Check]:
    async def described(s: Session, v: int, ongoing: bool) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init()
        if ongoing:
            await producer.add_partitions(3, partitions=(1,))
        await s.call(DESCRIBE_TRANSACTIONS, v, make(DESCRIBE_TRANSACTIONS, transactional_ids=[producer.transactional_id]),
                     "describe")

    async def listed(s: Session, v: int, **filters: Any) -> None:
        producer = Producer(s, unique(s, "dw"))
        await producer.init()
        await producer.add_partitions(3, partitions=(1,))
        mine = producer.transactional_id

        def own(plain: dict) -> dict:
            plain["transaction_states"] = [t for t in plain["transaction_states"] if t["transactional_id"] == mine]
            return plain

        await s.call(LIST_TRANSACTIONS, v, make(LIST_TRANSACTIONS, **{"state_filters": [], "producer_id_filters": [],
                                                                        "duration_filter": -1, **filters}),
                     "list", project=own)

    async def idempotent_producers(s: Session, v: int) -> None:
        producer = Producer(s, None, unique(s, "dw"))
        await create_topic(s, producer.topic, 3)
        await producer.init(timeout_ms=-1)
        await producer.produce(partition=2)
        await producer.produce(partition=2, label="produce the next sequence")
        producer.sequence = 0
        await producer.produce(partition=2, label="produce a duplicate")
        producer.sequence = 40
        await producer.produce(partition=2, label="produce out of sequence")
        await s.call(DESCRIBE_PRODUCERS, v, make(DESCRIBE_PRODUCERS, topics=[{"name": producer.topic,
                                                                              "partition_indexes": [2]}]),
                     "describe producers", project=lambda p: _own_producer(p, producer.producer_id))

    return [
        *sweep(DESCRIBE_TRANSACTIONS, "an empty transaction", steps=lambda s, v: described(s, v, False)),
        *sweep(DESCRIBE_TRANSACTIONS, "an ongoing transaction", steps=lambda s, v: described(s, v, True)),
        *sweep(DESCRIBE_TRANSACTIONS, "unknown transactional id", lambda s, v: make(
            DESCRIBE_TRANSACTIONS, transactional_ids=["dw-nobody"])),
        *sweep(LIST_TRANSACTIONS, "every transaction", steps=listed),
        *sweep(LIST_TRANSACTIONS, "ongoing ones", steps=lambda s, v: listed(s, v, state_filters=["Ongoing"])),
        *sweep(LIST_TRANSACTIONS, "an unknown state", steps=lambda s, v: listed(s, v, state_filters=["Sleeping"])),
        *sweep(LIST_TRANSACTIONS, "running for an hour", steps=lambda s, v: listed(s, v, duration_filter=3_600_000),
               versions=range(1, 3)),
        *sweep(LIST_TRANSACTIONS, "by pattern", steps=lambda s, v: listed(s, v, transactional_id_pattern="dw-.*"),
               versions=[2]),
        *sweep(LIST_TRANSACTIONS, "an invalid pattern", steps=lambda s, v: listed(s, v, transactional_id_pattern="(("),
               versions=[2]),
        *sweep(DESCRIBE_PRODUCERS, "an idempotent producer's sequences", steps=idempotent_producers),
    ]


def _own_producer(plain: dict, producer_id: int) -> dict:
    for topic in plain["topics"]:
        for partition in topic["partitions"]:
            partition["active_producers"] = [p for p in partition["active_producers"] if p["producer_id"] == producer_id]
    return plain


def checks() -> list[Check]:
    return [*init_producer_id_checks(), *transaction_checks(), *marker_checks(), *outside_checks(),
            *describe_checks()]
