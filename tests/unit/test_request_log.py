"""The request log's pieces (broker/operations/request_log.py) and its settings; the lines a real
client's requests get are tests/integration/test_request_log.py's."""

from __future__ import annotations

from kbroker.broker.config import load_config
from kbroker.broker.kafka_names import logs_requests
from kbroker.broker.operations.request_log import API_NAMES, answer_size, error_summary
from kbroker.protocol.messages.produce_response import (PartitionProduceResponse, ProduceResponse,
                                                         TopicProduceResponse)


def test_the_error_summary_counts_an_answers_error_codes_by_name() -> None:
    partitions = [PartitionProduceResponse(index=0, error_code=6), PartitionProduceResponse(index=1, error_code=6),
                  PartitionProduceResponse(index=2, error_code=0), PartitionProduceResponse(index=3, error_code=3)]
    response = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=partitions)])
    assert error_summary(0, response) == {"UNKNOWN_TOPIC_OR_PARTITION": 1, "NOT_LEADER_OR_FOLLOWER": 2}
    assert error_summary(0, ProduceResponse()) is None


def test_names_and_sizes() -> None:
    assert (API_NAMES[0], API_NAMES[17], API_NAMES[36], API_NAMES[88]) == (
        "Produce", "SaslHandshake", "SaslAuthenticate", "StreamsGroupHeartbeat")
    assert answer_size(None) == 0 and answer_size(b"abcd") == 4 and answer_size([b"ab", memoryview(b"cde")]) == 5


def test_off_by_default_and_on_by_each_source(tmp_path) -> None:
    assert load_config({}, env={}).log_requests is False
    assert load_config({"log_requests": True}, env={}).log_requests is True
    assert load_config({}, env={"KBROKER_LOG_REQUESTS": "true"}).log_requests is True
    toml = tmp_path / "kbroker.toml"
    toml.write_text("log_requests = true\n")
    assert load_config({}, str(toml), env={}).log_requests is True
    # the apache/kafka image's KAFKA_LOG4J_LOGGERS: kafka.request.logger at DEBUG or TRACE writes the lines
    assert logs_requests("kafka.controller=INFO, kafka.request.logger=DEBUG") is True
    assert logs_requests("kafka.request.logger=trace") is True
    assert logs_requests("kafka.request.logger=WARN") is False
    assert logs_requests("kafka.controller=DEBUG") is None
    env = {"KAFKA_LOG4J_LOGGERS": "kafka.request.logger=DEBUG"}
    assert load_config({}, env=env).log_requests is True
    assert load_config({}, env={**env, "KBROKER_LOG_REQUESTS": "false"}).log_requests is False  # KBROKER_ wins
