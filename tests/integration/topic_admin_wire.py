"""Topic admin requests on one Wire connection, each answered as (error code, message): what the
internal-topic tests send to kbroker and to Apache Kafka alike (tests/integration/
test_internal_topic_policy.py, tests/reference/test_internal_topics.py)."""

from __future__ import annotations

import uuid

from kbroker.protocol.messages.alter_configs_request import AlterableConfig as ReplaceConfig
from kbroker.protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from kbroker.protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kbroker.protocol.messages.create_topics_request import (
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
)
from kbroker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
)
from kbroker.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from kbroker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kbroker.protocol.messages.incremental_alter_configs_request import AlterableConfig as IncrementalConfig
from kbroker.protocol.messages.incremental_alter_configs_request import AlterConfigsResource as IncrementalResource
from kbroker.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kbroker.tests.integration.wire import Wire

OFFSETS, TXN = "__consumer_offsets", "__transaction_state"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations
TOPIC_RESOURCE = 2
ZERO_UUID = uuid.UUID(int=0)


def alter(wire: Wire, topic: str, configs: dict[str, str], validate_only: bool = False) -> tuple[int, str | None]:
    answer = wire.call(33, 2, AlterConfigsRequest([AlterConfigsResource(TOPIC_RESOURCE, topic, [
        ReplaceConfig(k, v) for k, v in configs.items()])], validate_only))
    return answer.responses[0].error_code, answer.responses[0].error_message


def incremental(wire: Wire, topic: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> tuple[int, str | None]:
    answer = wire.call(44, 1, IncrementalAlterConfigsRequest([IncrementalResource(TOPIC_RESOURCE, topic, [
        IncrementalConfig(name, op, value) for name, op, value in ops])], validate_only))
    return answer.responses[0].error_code, answer.responses[0].error_message


def create(wire: Wire, topic: str, partitions: int, configs: dict[str, str],
           validate_only: bool = False) -> tuple[int, str | None]:
    answer = wire.call(19, 7, CreateTopicsRequest([CreatableTopic(topic, partitions, -1, [], [
        CreatableTopicConfig(k, v) for k, v in configs.items()])], 30000, validate_only))
    return answer.topics[0].error_code, answer.topics[0].error_message


def grow(wire: Wire, topic: str, count: int, validate_only: bool = False) -> tuple[int, str | None]:
    answer = wire.call(37, 3, CreatePartitionsRequest([CreatePartitionsTopic(topic, count, None)], 30000,
                                                      validate_only))
    return answer.results[0].error_code, answer.results[0].error_message


def delete_records(wire: Wire, topic: str) -> int:
    answer = wire.call(21, 2, DeleteRecordsRequest([DeleteRecordsTopic(topic, [DeleteRecordsPartition(0, -1)])],
                                                   30000))
    return answer.topics[0].partitions[0].error_code


def delete_topic(wire: Wire, topic: str) -> tuple[int, str | None]:
    answer = wire.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name=topic, topic_id=ZERO_UUID)],
                                                  topic_names=[], timeout_ms=30000))
    return answer.responses[0].error_code, answer.responses[0].error_message


def configs_of(wire: Wire, topic: str) -> dict[str, str]:
    answer = wire.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsResource(TOPIC_RESOURCE, topic, None)],
                                                     include_synonyms=False, include_documentation=False))
    assert answer.results[0].error_code == 0, answer.results[0]
    return {c.name: c.value for c in answer.results[0].configs}


def metadata(wire: Wire, topic: str, auto_create: bool = False) -> tuple[int, int]:
    """(error code, partition count) of one topic in a Metadata v12 answer."""
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

    answer = wire.call(3, 12, MetadataRequest([MetadataRequestTopic(topic_id=ZERO_UUID, name=topic)], auto_create,
                                              False, False))
    return answer.topics[0].error_code, len(answer.topics[0].partitions)
