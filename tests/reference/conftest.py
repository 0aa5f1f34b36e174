"""Fixtures of the reference tests: a kbroker set up as the reference Kafka is (one per test file)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.tests.reference.pair import kbroker_like_kafka


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    broker = kbroker_like_kafka(tmp_path_factory.mktemp("kbroker") / "data")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def run_id() -> str:
    """A suffix for the names a test file makes on the reference Kafka, which the whole session shares;
    the tool comparisons replace it by RUN."""
    return uuid.uuid4().hex[:6]
