"""Streams groups under ACLs: the internal topics a StreamsGroupHeartbeat finds missing are created only
if the principal may CREATE them (on the cluster, else on each topic), as Kafka 4.4's KafkaApis checks
before it asks its controller; when refused, none of them is created and the MISSING_INTERNAL_TOPICS
status says so ("Unauthorized to CREATE on topics ...")."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kbroker.protocol.messages.streams_group_heartbeat_request import StreamsGroupHeartbeatRequest
from kbroker.tests.integration.sasl_wire import plain_login
from kbroker.tests.integration.security_setup import PASSWORDS, start_secure_broker
from kbroker.tests.integration.test_streams_group_wire import topology

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SOURCE = "streams-words"  # the topology's source topic (test_streams_group_wire.topology)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    sb = start_secure_broker(tmp_path_factory.mktemp("streams-acl"), "--authorizer-class-name", AUTHORIZER,
                             "--super-users", "User:admin", "--no-auto-create-topics-enable",
                             "--group-streams-initial-rebalance-delay-ms", "0")
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    admin.create_topics([NewTopic(SOURCE, 2, 1)])[SOURCE].result(30)
    grants = [AclBinding(ResourceType.TOPIC, SOURCE, ResourcePatternType.LITERAL, "User:reader", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW),
              AclBinding(ResourceType.GROUP, "sacl-", ResourcePatternType.PREFIXED, "User:reader", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)]
    for f in admin.create_acls(grants).values():
        f.result(30)
    sb.admin = admin
    yield sb
    sb.broker.stop()


def heartbeat(sb, app: str):
    wire = plain_login(sb.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
    try:
        return wire.call(88, 1, StreamsGroupHeartbeatRequest(
            group_id=app, member_id=str(uuid.uuid4()), member_epoch=0, endpoint_information_epoch=0,
            rebalance_timeout_ms=30_000, topology=topology(app), process_id=str(uuid.uuid4()),
            active_tasks=[], standby_tasks=[], warmup_tasks=[]))
    finally:
        wire.close()


def exists(sb, names: list[str]) -> list[bool]:
    wire = plain_login(sb.address("SASL_PLAINTEXT"), "admin", PASSWORDS["admin"])
    try:
        meta = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names],
                                                allow_auto_topic_creation=False))
        return [t.error_code == 0 for t in meta.topics]
    finally:
        wire.close()


def test_internal_topics_need_create(secure):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    app = f"sacl-{uuid.uuid4().hex[:6]}"
    internal = [f"{app}-counts-repartition", f"{app}-counts-changelog"]
    refused = heartbeat(secure, app)
    assert refused.error_code == 0
    (status,) = [s for s in refused.status if s.status_code == 3]  # MISSING_INTERNAL_TOPICS
    assert f"Unauthorized to CREATE on topics {', '.join(sorted(internal))}." in status.status_detail
    assert exists(secure, internal) == [False, False]

    grant = AclBinding(ResourceType.TOPIC, f"{app}-", ResourcePatternType.PREFIXED, "User:reader", "*",
                       AclOperation.CREATE, AclPermissionType.ALLOW)
    for f in secure.admin.create_acls([grant]).values():
        f.result(30)
    deadline = time.monotonic() + 30  # ACL changes reach the authorizer at once; a slow machine waits
    while True:
        answer = heartbeat(secure, app)
        if exists(secure, internal) == [True, True] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert exists(secure, internal) == [True, True]
    assert not any("Unauthorized" in (s.status_detail or "") for s in answer.status or [])


def test_a_topology_description_push_needs_read_on_the_group(secure):
    """StreamsGroupTopologyDescriptionUpdate (93): Read on the group, then Kafka 4.4's answer without a
    topology description plugin."""
    from kbroker.protocol.messages.streams_group_topology_description_update_request import (
        StreamsGroupTopologyDescriptionUpdateRequest, TopologyDescription,
    )

    wire = plain_login(secure.address("SASL_PLAINTEXT"), "reader", PASSWORDS["reader"])
    try:
        def push(group: str):
            return wire.call(93, 0, StreamsGroupTopologyDescriptionUpdateRequest(
                group_id=group, member_id="m", topology_epoch=0,
                topology_description=TopologyDescription(subtopologies=[], global_stores=[])))

        refused = push("other-group")
        assert (refused.error_code, refused.error_message) == (30, "Group authorization failed.")
        allowed = push(f"sacl-{uuid.uuid4().hex[:6]}")
        assert (allowed.error_code, allowed.error_message) == (
            35, "The broker has no streams group topology description plugin configured.")
    finally:
        wire.close()
