"""The scenario of a deleted topic's committed offsets, through confluent-kafka as a user runs it, for
every broker that must pass it (one kbroker node, `--nodes 3`, the cluster over PostgreSQL, and Apache
Kafka 4.4 beside kbroker in tests/reference/): groups commit offsets of a topic (one plainly, one in a
transaction still open when the topic goes), the topic is deleted and created again under its name,
and `committed()` is asked. Kafka 4.4 answers -1001 (no offset) for the old topic's partitions
(OffsetMetadataManager.onTopicsDeleted tombstones them, pending transactional ones included) and keeps
the group's offsets of other topics."""

from __future__ import annotations

import time
import uuid

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset there
TIMEOUT = 30


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT)
    await_partitions(bootstrap, topic, partitions)


def delete(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    await_partitions(bootstrap, topic, 0)


def await_partitions(bootstrap: str, topic: str, count: int) -> None:
    """Until the cluster's metadata lists `count` partitions of the topic with leaders (0: it is gone)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT
    while True:
        meta = admin.list_topics(timeout=TIMEOUT).topics.get(topic)  # all topics: none auto-created
        found = 0 if meta is None or meta.error is not None else \
            sum(1 for p in meta.partitions.values() if p.leader >= 0 and p.error is None)
        if found == count:
            return
        assert time.monotonic() < deadline, f"{topic}: {found} partitions led, not {count}"
        time.sleep(0.2)


def consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def committed(bootstrap: str, group: str, topic: str, partitions: int = 2) -> list[int]:
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap, group)
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], TIMEOUT)]
    finally:
        c.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap, group)
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


class Scenario:
    """Names of one run (unique, so a shared reference Kafka may run it more than once)."""

    def __init__(self, suffix: str | None = None) -> None:
        suffix = suffix or uuid.uuid4().hex[:6]
        self.topic, self.other = f"gone-{suffix}", f"kept-{suffix}"
        self.group, self.txn_group, self.txn_id = f"g-{suffix}", f"gt-{suffix}", f"tx-{suffix}"

    def commit_then_delete(self, bootstrap: str, recreate_on: str | None = None) -> dict[str, list[int]]:
        """Commit, delete the topic with a transaction's offsets of it still pending, commit that
        transaction, create the topic again (through `recreate_on`, default the same address);
        returns what committed() answered before and after."""
        from confluent_kafka import Producer, TopicPartition

        create(bootstrap, self.topic)
        create(bootstrap, self.other, 1)
        commit(bootstrap, self.group, {(self.topic, 0): 5, (self.topic, 1): 7, (self.other, 0): 3})
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": self.txn_id})
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.produce(self.other, b"out", partition=0)
        group = consumer(bootstrap, self.txn_group)
        try:
            producer.send_offsets_to_transaction([TopicPartition(self.topic, 0, 11), TopicPartition(self.other, 0, 4)],
                                                 group.consumer_group_metadata(), TIMEOUT)
        finally:
            group.close()
        seen = {"before": committed(bootstrap, self.group, self.topic)}
        delete(bootstrap, self.topic)
        producer.commit_transaction(TIMEOUT)  # its offsets of the deleted topic were tombstoned meanwhile
        create(recreate_on or bootstrap, self.topic)
        return {**seen, **self.observe(bootstrap)}

    def observe(self, bootstrap: str) -> dict[str, list[int]]:
        return {"after": committed(bootstrap, self.group, self.topic),
                "other": committed(bootstrap, self.group, self.other, 1),
                "txn": committed(bootstrap, self.txn_group, self.topic),
                "txn_other": committed(bootstrap, self.txn_group, self.other, 1)}


def group_deleted_in_a_transaction(bootstrap: str, suffix: str) -> list[int]:
    """A group with a committed offset of partition 0 is deleted (DeleteGroups) while a transaction
    holds offsets of partitions 0 and 1 for it; the transaction then commits. Kafka 4.4's DeleteGroups
    tombstones the pending offsets too (deleteAllOffsets), and a tombstone ends them (its replay clears
    the key's open transactions), so the commit brings nothing back: committed() answers -1001 for
    both, live and after a restart."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = f"txd-{suffix}", f"gd-{suffix}"
    create(bootstrap, topic, 2)
    commit(bootstrap, group, {(topic, 0): 3})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"txd-{suffix}"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"out", partition=0)
    member = consumer(bootstrap, group)
    try:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 5)],
                                             member.consumer_group_metadata(), TIMEOUT)
    finally:
        member.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    producer.commit_transaction(TIMEOUT)
    return committed(bootstrap, group, topic, 2)


# What Kafka 4.4 answers (tests/reference/test_deleted_topic_offsets_vs_kafka.py checks it against Kafka).
EXPECTED = {"before": [5, 7], "after": [NO_OFFSET, NO_OFFSET], "other": [3],
            "txn": [NO_OFFSET, NO_OFFSET], "txn_other": [4]}
