"""The log cleaner's checkpoint file is Kafka's: Kafka 4.4 itself cleans a compacted topic and writes its
cleaner-offset-checkpoint, which kbroker's reader (broker/storage/log/cleaner_checkpoint.py) reads
entry for entry; kbroker's file for the same topic after its cleaning has the same shape (version 0,
the count, `topic partition offset` lines) and names the same offset, the end of the last segment cleaned."""

from __future__ import annotations

import time

import pytest

from kbroker.broker.storage.log.cleaner_checkpoint import FILE, parse
from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_log_cleaner import fill
from kbroker.tests.reference.kafka import KafkaProcess, kafka_libs

WAIT_S = 120  # a bound against a hang: both cleaners back off half a second here


def cleaned_to(path, topic: str, offset: int) -> int:
    """The topic's checkpoint once it reaches `offset` (a cleaning may run while the records come, and
    stop short of it), or the last one seen when the bound passes."""
    deadline = time.monotonic() + WAIT_S
    seen = None
    while seen != offset and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = parse(path.read_text()).get((topic, 0)) if path.exists() else None
    return seen


def test_the_checkpoint_file_is_kafkas(tmp_path):
    """Every record rolls a segment: both clean up to the active one, the last record's (29)."""
    if kafka_libs() is None:
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    with KafkaProcess(tmp_path / "kafka", {"log.cleaner.backoff.ms": "500"}) as kafka:
        fill(kafka, "kept", 30)
        theirs = cleaned_to(kafka.log_dir / FILE, "kept", 29)
        text = (kafka.log_dir / FILE).read_text()
    with BrokerProcess(tmp_path / "kbroker", "--log-cleaner-backoff-ms", "500") as broker:
        fill(broker, "kept", 30)
        ours = cleaned_to(tmp_path / "kbroker" / FILE, "kept", 29)
    assert (ours, theirs) == (29, 29), (ours, text)
    lines = text.splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2 == len(parse(text))
    assert f"kept 0 {theirs}" in lines
