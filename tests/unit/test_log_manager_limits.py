"""The log manager's limits (issue 10, section 4): segment.bytes below 1 MiB refused as in Kafka 4, the
per-broker partition cap, and creation off the event loop that still reserves names and budget."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.broker.storage.log import LogManager
from kbroker.protocol.errors import ErrorCode, KafkaError


def test_segment_bytes_below_one_mib_is_refused(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="never")
    with pytest.raises(KafkaError) as raised:
        logs.create_topic("tiny", 1, {"segment.bytes": str(1024 * 1024 - 1)})
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    logs.create_topic("small", 1, {"segment.bytes": str(1024 * 1024)})
    with pytest.raises(KafkaError):  # the internal override is for tools, never for requests
        logs.create_topic("hidden", 1, {"internal.segment.bytes": "100"})
    logs.create_topic("tool", 1, {"internal.segment.bytes": "100"}, allow_internal_configs=True)
    assert logs.get_log("tool", 0).config.segment_bytes == 100
    logs.close()
    reopened = LogManager(tmp_path, flush_policy="never")  # what the broker wrote, it loads
    assert reopened.get_log("tool", 0).config.segment_bytes == 100
    reopened.close()


async def test_concurrent_creations_reserve_names_and_partition_budget(tmp_path) -> None:
    logs = LogManager(tmp_path, flush_policy="never", max_partitions=100)
    results = await asyncio.gather(
        logs.create_topic_async("a", 60, {}),
        logs.create_topic_async("a", 10, {}),
        logs.create_topic_async("b", 60, {}),
        return_exceptions=True,
    )
    assert not isinstance(results[0], Exception)
    assert isinstance(results[1], KafkaError) and results[1].code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert isinstance(results[2], KafkaError) and results[2].code == ErrorCode.POLICY_VIOLATION
    assert sorted(logs.topics()) == ["a"] and not list(tmp_path.glob("b-*"))
    with pytest.raises(KafkaError) as raised:
        await logs.add_partitions_async("a", 101)
    assert raised.value.code == ErrorCode.POLICY_VIOLATION
    await logs.add_partitions_async("a", 100)
    assert logs.topics()["a"].num_partitions == 100 and logs.get_log("a", 99) is not None
    logs.close()


def test_a_topic_stored_with_tiny_segments_by_an_older_broker_still_loads(tmp_path) -> None:
    import json

    logs = LogManager(tmp_path, flush_policy="never")
    logs.create_topic("old", 1, {"segment.bytes": str(1024 * 1024)})
    logs.close()
    meta = tmp_path / "topics" / "old.json"
    body = json.loads(meta.read_text())
    body["configs"]["segment.bytes"] = "100"  # what the broker accepted before Kafka 4's floor
    del body["crc32c"]  # and before topic records carried a checksum
    meta.write_text(json.dumps(body))
    reopened = LogManager(tmp_path, flush_policy="never")
    assert reopened.get_log("old", 0).config.segment_bytes == 100
    reopened.close()
