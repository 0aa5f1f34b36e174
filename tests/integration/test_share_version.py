"""`share.version` changed at run time by UpdateFeatures, against a real broker process: the level is
kept in the data directory and holds across a restart (Kafka keeps it in its metadata log), at 1 share
groups work without dead letter queues (Kafka's isDLQEnabledForGroup), at 0 they answer
UNSUPPORTED_VERSION, ACLs or not. The answers themselves are compared with Kafka 4.4's in
tests/reference/test_share_version_differential.py."""

from __future__ import annotations

import uuid

from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kbroker.protocol.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_dlq import (REJECT, broker_with_controls, configure, create_topic,
                                                      dlq_records, metric)
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup
from kbroker.tests.integration.wire import Wire

SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE = 2, 3, 1


def features(bootstrap: str) -> tuple[dict[str, int], int]:
    w = Wire(bootstrap)
    try:
        answer = w.call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        return {f.name: f.max_version_level for f in answer.finalized_features}, answer.finalized_features_epoch
    finally:
        w.close()


def set_share_version(bootstrap: str, level: int, kind: int) -> None:
    w = Wire(bootstrap)
    try:
        answer = w.call(57, 1, UpdateFeaturesRequest(timeout_ms=10_000, feature_updates=[
            FeatureUpdateKey(feature="share.version", max_version_level=level, upgrade_type=kind)]))
        assert (answer.error_code, answer.error_message) == (0, None)
    finally:
        w.close()


def heartbeat(bootstrap: str, group: str) -> int:
    w = Wire(bootstrap)
    try:
        return w.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                                        rack_id=None, subscribed_topic_names=["t"])).error_code
    finally:
        w.close()


def test_a_lowered_share_version_holds_across_a_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    try:
        levels, epoch = features(broker.bootstrap)
        assert (levels["share.version"], epoch) == (2, 1)
        set_share_version(broker.bootstrap, 1, SAFE_DOWNGRADE)
        assert (features(broker.bootstrap)[0]["share.version"], features(broker.bootstrap)[1]) == (1, 2)
        set_share_version(broker.bootstrap, 0, UNSAFE_DOWNGRADE)
        assert heartbeat(broker.bootstrap, "g1") == 35  # UNSUPPORTED_VERSION
        broker.stop()
        broker.start()
        levels, epoch = features(broker.bootstrap)
        assert ("share.version" not in levels, epoch) == (True, 3)  # level 0 is not finalized, as Kafka lists it
        assert levels["group.version"] == 1  # the others as they were
        assert heartbeat(broker.bootstrap, "g1") == 35
        set_share_version(broker.bootstrap, 2, UPGRADE)
        broker.kill()  # answered means durable
        broker.start()
        assert features(broker.bootstrap) == ({**levels, "share.version": 2}, 4)
        assert heartbeat(broker.bootstrap, "g1") == 0
    finally:
        broker.kill()


def test_share_version_1_has_no_dead_letter_queue(tmp_path):
    broker = broker_with_controls(tmp_path)
    try:
        topic, topic_id, group = setup(broker, 0)
        dlq = f"dlq.{uuid.uuid4().hex[:6]}"
        create_topic(broker, dlq)
        configure(broker, group, **{"errors.deadletterqueue.topic.name": dlq})
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        produce(broker, topic, 2)
        assert acquired(a.fetch(max_records=2, max_wait_ms=5_000)) == [(0, 1, 1)]
        set_share_version(broker.bootstrap, 1, SAFE_DOWNGRADE)
        a.fetch(acks=[(0, 0, [REJECT])])  # archived, no copy: DLQs are share.version 2's
        set_share_version(broker.bootstrap, 2, UPGRADE)
        a.fetch(acks=[(1, 1, [REJECT])])  # copied
        copies = dlq_records(broker, dlq, expect=1)
        assert [dict(r.headers)["__dlq.errors.offset"] for r in copies] == [b"1"]
        assert metric(broker, "kbroker_share_dead_letter_records_total", group, 1) == 1
    finally:
        broker.kill()
