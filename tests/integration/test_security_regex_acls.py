"""KIP-848 regex subscriptions under ACLs (issue 38, item 7), as Kafka 4.4 does it: a regex resolves
only to topics the member may DESCRIBE (TopicRegexResolver filters them with the authorizer), and
ConsumerGroupDescribe answers TOPIC_AUTHORIZATION_FAILED, without members, for a group whose
assignments name a topic the caller may not describe (KafkaApis.handleConsumerGroupDescribe)."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from kbroker.protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kbroker.protocol.messages.metadata_request import MetadataRequest
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PUBLIC, SECRET = "rx-public", "rx-secret"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("regex-acl"), "--authorizer-class-name", AUTHORIZER,
                             "--super-users", "User:admin", "--no-auto-create-topics-enable")
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    for f in admin.create_topics([NewTopic(PUBLIC, 2, 1), NewTopic(SECRET, 2, 1)]).values():
        f.result(30)
    grants = [AclBinding(ResourceType.TOPIC, PUBLIC, ResourcePatternType.LITERAL, "User:reader", "*",
                         AclOperation.READ, AclPermissionType.ALLOW),
              AclBinding(ResourceType.GROUP, "rx-", ResourcePatternType.PREFIXED, "User:reader", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)]
    for f in admin.create_acls(grants).values():
        f.result(30)
    yield sb
    sb.broker.stop()


def login(sb, user: str):
    return plain_login(sb.address("SASL_PLAINTEXT"), user, PASSWORDS[user])


def topic_ids(sb) -> dict[uuid.UUID, str]:
    wire = login(sb, "admin")
    try:
        return {t.topic_id: t.name for t in wire.call(3, 12, MetadataRequest(topics=None)).topics}
    finally:
        wire.close()


def join_by_regex(sb, user: str, group: str, regex: str) -> set[str]:
    """A KIP-848 member subscribing by regex; the topics of the assignment it gets once the regex is
    resolved (after the joining heartbeat, as Kafka resolves it: the next heartbeats bring them)."""
    wire = login(sb, user)
    member = str(uuid.uuid4())
    try:
        r = wire.call(68, 1, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                           rebalance_timeout_ms=30000, subscribed_topic_regex=regex,
                                                           topic_partitions=[]))
        assert r.error_code == 0, r
        assert not r.assignment.topic_partitions  # nothing resolved yet
        deadline = time.monotonic() + 30  # a bound against a hang
        while True:
            time.sleep(0.05)
            owned = [TopicPartitions(t.topic_id, t.partitions)
                     for t in r.assignment.topic_partitions] if r.assignment is not None else None
            later = wire.call(68, 1, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member,
                                                                   member_epoch=r.member_epoch,
                                                                   topic_partitions=owned))
            assert later.error_code == 0, later
            if later.assignment is not None:
                r = later
            if r.assignment.topic_partitions or time.monotonic() > deadline:
                break
        names = topic_ids(sb)
        return {names[tp.topic_id] for tp in r.assignment.topic_partitions}
    finally:
        wire.close()


def describe(sb, user: str, group: str):
    wire = login(sb, user)
    try:
        return wire.call(69, 0, ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    finally:
        wire.close()


def test_a_regex_resolves_only_to_topics_the_member_may_describe(cluster):
    assert join_by_regex(cluster, "reader", "rx-readers", "rx-.*") == {PUBLIC}
    group = describe(cluster, "admin", "rx-readers")
    assert group.error_code == 0
    shown = {tp.topic_name for m in group.members for a in (m.assignment, m.target_assignment)
             for tp in a.topic_partitions}
    assert shown == {PUBLIC}  # the secret topic is neither assigned nor named
    # a super user's member of another group gets both: the resolution is the member's
    assert join_by_regex(cluster, "admin", "rx-admins", "rx-.*") == {PUBLIC, SECRET}


def test_describe_hides_a_group_whose_assignment_names_a_topic_the_caller_may_not_describe(cluster):
    join_by_regex(cluster, "admin", "rx-mixed", "rx-.*")
    seen_by_reader = describe(cluster, "reader", "rx-mixed")  # reader may describe the group, not SECRET
    assert seen_by_reader.error_code == 29 and seen_by_reader.members == []  # TOPIC_AUTHORIZATION_FAILED
    assert SECRET not in repr(seen_by_reader)
    assert describe(cluster, "admin", "rx-mixed").error_code == 0
