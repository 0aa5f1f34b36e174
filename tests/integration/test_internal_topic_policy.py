"""The internal topics' policy (issue 38, item 2), against real broker processes.

Apache Kafka 4.4 accepts every config change on `__consumer_offsets` and `__transaction_state`,
CreatePartitions and DeleteTopics of them, and CreateTopics of either before it exists, with any
partition count and configs (asked of the reference broker: tests/reference/test_internal_topics.py);
it refuses DeleteRecords (INVALID_TOPIC_EXCEPTION) and CreateTopics of `__cluster_metadata`
(INVALID_REQUEST). kbroker refuses, besides, every change whose result would let its own records be
deleted by anyone but its coordinator, each with an error event: the issue's sequence (compact with a
1 s retention and 100 ms segments, accepted as Kafka does; then IncrementalAlterConfigs DELETE of
cleanup.policy, which left the topic on the broker default `delete`) erased 20 groups' offsets.
"""

from __future__ import annotations

import json
import time

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
)
from kbroker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from kbroker.tests.integration.broker_process import BrokerProcess, free_port
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.topic_admin_wire import (
    APPEND, DELETE, OFFSETS, SET, SUBTRACT, TXN, alter, configs_of, create, delete_records, delete_topic, grow,
    incremental, metadata,
)
from kbroker.tests.integration.wire import Wire

GROUPS = [f"policy-group-{i}" for i in range(20)]
SHARE = "__share_group_state"
ANONYMOUS = "User:ANONYMOUS"


def commit(wire: Wire, group: str, offset: int) -> int:
    answer = wire.call(8, 8, OffsetCommitRequest(group, -1, "", None, -1, [OffsetCommitRequestTopic(
        "policy-data", partitions=[OffsetCommitRequestPartition(0, offset, -1, "")])]))
    return answer.topics[0].partitions[0].error_code


def committed(wire: Wire, group: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        answer = wire.call(9, 7, OffsetFetchRequest(group, [OffsetFetchRequestTopic("policy-data", [0])],
                                                    require_stable=True))
        error = answer.error_code or answer.topics[0].partitions[0].error_code
        if error not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT):
            assert error == 0, answer
            return answer.topics[0].partitions[0].committed_offset
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def refusals(broker: BrokerProcess) -> list[tuple[str, str]]:
    return [(e["topic"], e["operation"]) for e in broker.events("internal_topic_change_refused")]


# --- the issue's reproduction ----------------------------------------------------------------------

def test_the_issues_two_requests_no_longer_erase_every_committed_offset(tmp_path):
    """AlterConfigs {cleanup.policy=compact, retention.ms=1000, segment.ms=100} is accepted (as Kafka
    accepts it: the topic stays compacted, retention does not apply); the DELETE of cleanup.policy that
    followed it is refused, so retention never runs on the topic and every group keeps its offset."""
    with BrokerProcess(tmp_path / "data", "--log-retention-check-interval-ms", "100") as broker:
        wire = Wire(broker.bootstrap)
        assert create(wire, "policy-data", 1, {})[0] == 0
        for i, group in enumerate(GROUPS):
            assert commit(wire, group, 100 + i) == 0
        first = alter(wire, OFFSETS, {"cleanup.policy": "compact", "retention.ms": "1000", "segment.ms": "100"})
        second = incremental(wire, OFFSETS, [("cleanup.policy", DELETE, None)])
        time.sleep(2.5)  # past retention.ms and many retention checks: what retention would delete, it has
        wire.close()
        broker.restart()
        wire = Wire(broker.bootstrap)
        after_restart = {group: committed(wire, group) for group in GROUPS}
        policy = configs_of(wire, OFFSETS)["cleanup.policy"]
        wire.close()
        events = broker.events("internal_topic_change_refused")
    assert after_restart == {group: 100 + i for i, group in enumerate(GROUPS)}
    assert policy == "compact"
    assert first == (0, None)
    assert second[0] == ErrorCode.POLICY_VIOLATION and "cleanup.policy" in second[1], second
    assert [(e["topic"], e["operation"], e["api"]) for e in events] == [(OFFSETS, "alter_configs", 44)]
    assert events[0]["level"] == "warning" and "delete" in events[0]["reason"]


# --- every other way to the same loss --------------------------------------------------------------

def start_transactions(broker: BrokerProcess, transactional_id: str) -> None:
    """The first transactional producer: the broker creates `__transaction_state` for it."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("policy-txn-data", b"v")
    producer.commit_transaction(30)


def test_no_config_change_by_any_api_lets_an_internal_topic_delete_its_records(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        start_transactions(broker, "policy-configs")
        wire = Wire(broker.bootstrap)
        refused = {
            "replace without cleanup.policy": alter(wire, OFFSETS, {"retention.ms": "1000"}),
            "replace with delete": alter(wire, OFFSETS, {"cleanup.policy": "delete"}),
            "replace with compact,delete": alter(wire, OFFSETS, {"cleanup.policy": "delete,compact"}),
            "replace, validate only": alter(wire, OFFSETS, {"cleanup.policy": "delete"}, validate_only=True),
            "set delete": incremental(wire, OFFSETS, [("cleanup.policy", SET, "delete")]),
            "append delete": incremental(wire, OFFSETS, [("cleanup.policy", APPEND, "delete")]),
            "delete": incremental(wire, OFFSETS, [("cleanup.policy", DELETE, None)]),
            "delete then set compact,delete": incremental(wire, OFFSETS, [("cleanup.policy", DELETE, None),
                                                                          ("segment.ms", SET, "100")]),
            # an empty policy is a valid value in Kafka 4.4 (no cleanup at all), so the policy refuses it
            "subtract compact": incremental(wire, OFFSETS, [("cleanup.policy", SUBTRACT, "compact")]),
            "txn: set delete": incremental(wire, TXN, [("cleanup.policy", SET, "delete")]),
        }
        # Not a policy question: the value itself is wrong (an empty item in the list), INVALID_CONFIG
        # first, as Kafka validates a change before its policy sees it.
        invalid = incremental(wire, OFFSETS, [("cleanup.policy", SET, "compact,,delete")])
        accepted = {
            "set compact with retention": incremental(wire, OFFSETS, [("cleanup.policy", SET, "compact"),
                                                                      ("retention.ms", SET, "1000")]),
            "subtract delete": incremental(wire, OFFSETS, [("cleanup.policy", SUBTRACT, "delete")]),
            "a harmless change": incremental(wire, OFFSETS, [("min.cleanable.dirty.ratio", SET, "0.4")]),
            "replace keeping compact": alter(wire, OFFSETS, {"cleanup.policy": "compact", "segment.ms": "60000",
                                                              "segment.bytes": "104857600"}),
        }
        policy = configs_of(wire, OFFSETS)["cleanup.policy"]
        wire.close()
        events = refusals(broker)
    assert {k: v[0] for k, v in refused.items()} == dict.fromkeys(refused, ErrorCode.POLICY_VIOLATION)
    assert all(f"Internal topic {OFFSETS}" in m or f"Internal topic {TXN}" in m for _, m in refused.values())
    assert invalid[0] == ErrorCode.INVALID_CONFIG
    assert {k: v[0] for k, v in accepted.items()} == dict.fromkeys(accepted, 0)
    assert policy == "compact"
    assert len(events) == len(refused) and events[-1] == (TXN, "alter_configs")


def test_a_super_user_is_refused_too_and_the_event_names_who_asked(tmp_path):
    """The policy is no authorization: a super user on a SASL listener (with an authorizer) is refused as
    an anonymous client on PLAINTEXT is, and each event names the principal that asked."""
    plaintext, sasl = free_port(), free_port()
    users = tmp_path / "plain-users"
    users.write_text("admin=admin-secret-pw\n")  # by hand, as Kafka's JAAS users are
    with BrokerProcess(tmp_path / "data", "--listeners",
                       f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                       "--sasl-enabled-mechanisms", "PLAIN", "--sasl-plain-users-file", str(users),
                       "--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                       "--super-users", "User:admin;User:ANONYMOUS", port=plaintext, listen_flag=False) as broker:
        admin = plain_login(f"127.0.0.1:{sasl}", "admin", "admin-secret-pw")
        by_admin = incremental(admin, OFFSETS, [("cleanup.policy", DELETE, None)])
        admin.close()
        anonymous = Wire(broker.bootstrap)
        by_anonymous = delete_topic(anonymous, OFFSETS)
        anonymous.close()
        events = broker.events("internal_topic_change_refused")
    assert by_admin[0] == ErrorCode.POLICY_VIOLATION and by_anonymous[0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert [(e["operation"], e["principal"], e["api"]) for e in events] == [
        ("alter_configs", "User:admin", 44), ("delete_topics", ANONYMOUS, 20)]


def test_internal_topics_keep_their_partitions_their_records_and_their_existence(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        wire = Wire(broker.bootstrap)
        grown = grow(wire, OFFSETS, 60)
        grown_validate = grow(wire, OFFSETS, 60, validate_only=True)
        trimmed = delete_records(wire, OFFSETS)
        deleted = delete_topic(wire, OFFSETS)
        wire.close()
        events = refusals(broker)
    assert grown[0] == grown_validate[0] == ErrorCode.POLICY_VIOLATION, (grown, grown_validate)
    assert "partition count" in grown[1]
    assert trimmed == ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka's own answer (ReplicaManager.deleteRecords)
    assert deleted[0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert events == [(OFFSETS, "create_partitions"), (OFFSETS, "create_partitions"), (OFFSETS, "delete_records"),
                      (OFFSETS, "delete_topics")]


# --- creating them by hand -------------------------------------------------------------------------

def test_creating_an_internal_topic_by_hand_is_refused_and_the_broker_makes_its_own(tmp_path):
    """Before the first transaction `__transaction_state` does not exist: a client's CreateTopics of it
    (3 partitions, cleanup.policy=delete) was accepted, and after retention and a kill -9 an open
    transaction was never aborted. Refused now with Kafka's answer for its own internal topic
    (`Creation of internal topic __cluster_metadata is prohibited.`, INVALID_REQUEST); a topic that
    exists is TOPIC_ALREADY_EXISTS, as Kafka answers. The broker makes the topic with its settings."""
    with BrokerProcess(tmp_path / "data", "--transaction-state-log-num-partitions", "4") as broker:
        wire = Wire(broker.bootstrap)
        by_hand = create(wire, TXN, 3, {"cleanup.policy": "delete"})
        by_hand_validate = create(wire, TXN, 3, {}, validate_only=True)
        existing = create(wire, OFFSETS, 3, {})
        start_transactions(broker, "policy-txn")
        configs = configs_of(wire, TXN)
        wire.close()
        events = refusals(broker)
        created = [e for e in broker.events("topic_created") if e["topic"] == TXN]
    assert by_hand[0] == by_hand_validate[0] == ErrorCode.INVALID_REQUEST, (by_hand, by_hand_validate)
    assert by_hand[1].startswith(f"Creation of internal topic {TXN} is prohibited")
    assert existing[0] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert events == [(TXN, "create_topics"), (TXN, "create_topics")]
    assert [e["partitions"] for e in created] == [4]
    assert configs["cleanup.policy"] == "compact"


def test_metadata_auto_creation_never_makes_an_internal_topic_the_broker_does_not_own(tmp_path):
    """A Metadata request allowed to create topics made `__share_group_state` with the broker defaults
    (cleanup.policy=delete, retention.ms a week: the share coordinator's records would age out) and
    `__cluster_metadata` as an ordinary topic. Kafka 4.4 answers UNKNOWN_TOPIC_OR_PARTITION for both
    (and makes the first with its share coordinator's settings, which kbroker does not run yet); kbroker
    answers the same and makes neither, each refusal an event. `__transaction_state` is still made, by
    its coordinator, with its own settings."""
    with BrokerProcess(tmp_path / "data", "--transaction-state-log-num-partitions", "3") as broker:
        wire = Wire(broker.bootstrap)
        asked = {name: metadata(wire, name, auto_create=True)[0] for name in (SHARE, "__cluster_metadata")}
        deadline = time.monotonic() + 30
        while (txn := metadata(wire, TXN, auto_create=True))[0] != 0:
            assert time.monotonic() < deadline, txn
            time.sleep(0.1)
        after = {name: metadata(wire, name)[0] for name in (SHARE, "__cluster_metadata")}
        wire.close()
        events = refusals(broker)
    assert asked == after == dict.fromkeys(asked, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert txn == (0, 3)
    assert events == [(SHARE, "metadata_auto_create"), ("__cluster_metadata", "metadata_auto_create")]


# --- a data directory an older broker left exposed ---------------------------------------------------

def test_an_internal_topic_left_without_its_policy_is_repaired_at_start(tmp_path):
    """A topic record an older kbroker wrote after the issue's DELETE (no cleanup.policy: the broker
    default `delete` applies): the next start puts `compact` back before retention could run, and says so."""
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        wire = Wire(broker.bootstrap)
        assert create(wire, "policy-data", 1, {})[0] == 0
        assert commit(wire, "kept", 7) == 0
        wire.close()
    record = data / "topics" / f"{OFFSETS}.json"
    body = json.loads(record.read_text())
    body.pop("crc32c", None)  # as a kbroker before checksums wrote it
    del body["configs"]["cleanup.policy"]
    body["configs"]["retention.ms"] = "1000"
    record.write_text(json.dumps(body))
    with BrokerProcess(data, "--log-retention-check-interval-ms", "100") as broker:
        time.sleep(1.5)
        wire = Wire(broker.bootstrap)
        offset = committed(wire, "kept")
        policy = configs_of(wire, OFFSETS)["cleanup.policy"]
        wire.close()
        repaired = broker.events("internal_topic_config_repaired")
    assert offset == 7
    assert policy == "compact"
    assert [(e["topic"], e["level"]) for e in repaired] == [(OFFSETS, "error")]
    assert repaired[0]["was"] == {"cleanup.policy": "delete"} and repaired[0]["now"] == {"cleanup.policy": "compact"}
