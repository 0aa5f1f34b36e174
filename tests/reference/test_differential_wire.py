"""The wire level of the differential checks: every API and version kbroker serves, and the coordinator's
two state machines row by row, sent raw to Apache Kafka 4.4 and to kbroker and compared field by field
(tests/reference/differential/). The set of differences observed must be the set listed, with reasons,
in tests/reference/differences/wire.toml; the run's counts go to build/differential/wire.json, and
docs/differential.md's wire section must be what they render.

One Kafka and one kbroker serve the module, configured alike (differential/suite.py SUITE_CONFIG);
every check uses names of its own.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.tests.integration.wire import Wire
from kbroker.tests.reference.differential import differences, report, suite
from kbroker.tests.reference.differential.runner import run_checks
from kbroker.tests.reference.differential.versions import KAFKA_44

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    from kbroker.tests.reference.kafka import kafka_libs

    if kafka_libs() is None:
        if os.environ.get("KBROKER_REQUIRE_KAFKA") == "1":
            pytest.fail("Apache Kafka's jars are missing (make kafka-jars)")
        pytest.skip("Apache Kafka's jars are missing: run `make kafka-jars`")
    with suite.brokers(tmp_path_factory.mktemp("differential-wire")) as pair:
        yield pair


@pytest.fixture(scope="module")
def verdict(brokers):
    kafka, kbroker = brokers
    results = asyncio.run(run_checks(kafka, kbroker, suite.SETUPS, suite.checks()))
    judged = differences.judge("wire", results, differences.load("wire"))
    report.RESULTS.mkdir(parents=True, exist_ok=True)
    (report.RESULTS / "wire.json").write_text(json.dumps(judged.as_json(suite.extras(judged.counted)), indent=1) + "\n")
    return judged


def test_kafka_serves_the_versions_the_checks_assume(brokers):
    """The table of Kafka 4.4's versions (versions.KAFKA_44) that chooses what is checked is the running
    reference's own ApiVersions answer."""
    kafka, _ = brokers
    wire = Wire(kafka.bootstrap)
    try:
        answer = wire.call(18, 3, ApiVersionsRequest(client_software_name="differential", client_software_version="1"))
    finally:
        wire.close()
    assert answer.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == KAFKA_44


def test_every_difference_is_fixed_or_listed(verdict):
    assert not [r for r in verdict.results if r.error is not None], "\n".join(
        r.diff_text() for r in verdict.results if r.error is not None)
    assert not verdict.failure(), verdict.failure()


def test_the_docs_table_is_this_run(verdict):
    """docs/differential.md's wire section is what this run renders (counts, rows, listed differences)."""
    problem = report.section_is_current(verdict.as_json(suite.extras(verdict.counted)))
    assert not problem, problem
