"""Fixtures for every test directory: the reference broker, Apache Kafka itself."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Hypothesis' per-example deadline (200 ms) is a timed assert: on a loaded 2-core machine one example of a
# millisecond took 287 ms and failed the run. Property tests judge results, never speed.
settings.register_profile("kbroker", deadline=None)
settings.load_profile("kbroker")


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory):
    """Apache Kafka 4.4.0, one KRaft node started once per test worker and stopped at its end
    (tests/reference/kafka.py). Skipped when its jars are missing, except under `make test`, which
    resolves them and sets KBROKER_REQUIRE_KAFKA=1 so that a missing reference fails instead."""
    from kbroker.tests.reference.kafka import KafkaProcess, require_kafka_libs

    require_kafka_libs()
    kafka = KafkaProcess(tmp_path_factory.mktemp("kafka-reference"))
    try:
        yield kafka
    finally:
        kafka.stop()
