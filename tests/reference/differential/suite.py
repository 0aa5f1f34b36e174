"""The wire level's checks, all of them, and the two brokers they run against, configured alike.

    with brokers(tmp_path) as (kafka, kbroker):
        results = asyncio.run(run_checks(kafka, kbroker, SETUPS, checks()))
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from . import (apis_admin, apis_data, apis_groups, apis_share, apis_streams, apis_txn, coordinator_classic,
               coordinator_consumer)
from .runner import Check, Result, Target
from .versions import kbroker_only_versions

# The same group settings on both, small enough that the rows can reach the limits and timeouts.
SUITE_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.max.size": "3",
    "group.min.session.timeout.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.max.size": "3",
}
# Kafka's alone: kbroker computes a consumer group's target assignment in the heartbeat that needs it,
# which Kafka does with these two (4.3 added an interval, 1 s by default, between assignments and an
# assignor thread): with Kafka's defaults the rows would compare the timing of its thread.
KAFKA_ONLY_CONFIG = {
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
}

SETUPS: list[Check] = [*apis_data.SETUPS, *apis_groups.SETUPS]


def checks() -> list[Check]:
    """Serial checks run after the others in this order: the group "" ones, then the deletion of
    __consumer_offsets, which would break any group check after it."""
    return [*apis_data.checks(), *apis_admin.checks(), *apis_groups.checks(), *apis_streams.checks(), *apis_share.checks(),
            *apis_txn.checks(),
            *coordinator_classic.ROWS, *coordinator_consumer.ROWS, *apis_admin.delete_offsets_topic_checks()]


def kbroker_args() -> list[str]:
    return [arg for name, value in SUITE_CONFIG.items() for arg in ("--" + name.replace(".", "-"), value)]


@contextlib.contextmanager
def brokers(base: Path) -> Iterator[tuple[Target, Target]]:
    """Apache Kafka 4.4 and kbroker, started side by side (Kafka's JVM takes the longer), stopped after."""
    from kbroker.tests.integration.broker_process import BrokerProcess
    from kbroker.tests.reference.kafka import KafkaProcess

    kafka = KafkaProcess(base / "kafka", {**SUITE_CONFIG, **KAFKA_ONLY_CONFIG}, start=False)
    failed: list[BaseException] = []

    def start_kafka() -> None:
        try:
            kafka.start()
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            failed.append(exc)

    starting = threading.Thread(target=start_kafka)
    starting.start()
    kbroker = None
    try:
        kbroker = BrokerProcess(base / "kbroker" / "data", *kbroker_args())
        starting.join()
        if failed:
            raise failed[0]
        yield Target("kafka", kafka.bootstrap), Target("kbroker", kbroker.bootstrap)
    finally:
        starting.join()
        kafka.stop()
        if kbroker is not None:
            kbroker.stop()


def extras(results: list[Result]) -> dict:
    """What the wire section shows beyond the counts: checks per API and version, the versions not
    checked, and the coordinator tables row by row."""
    by_api: dict[str, dict] = {}
    for r in results:
        if r.check.table == "apis":
            entry = by_api.setdefault(r.check.api, {"api": r.check.api, "versions": set(), "checks": 0, "equal": 0})
            if r.check.version is not None:
                entry["versions"].add(r.check.version)
            entry["checks"] += 1
            entry["equal"] += r.equal
    apis = []
    for entry in by_api.values():
        versions = sorted(entry["versions"])
        span = "" if not versions else f"{versions[0]}-{versions[-1]}" if len(versions) > 1 else f"{versions[0]}"
        apis.append({**entry, "versions": span, "version_count": len(versions)})
    tables: dict[str, list] = {}
    for r in results:
        if r.check.table in ("classic", "consumer"):
            tables.setdefault(r.check.table, []).append({
                "row": r.check.id.split(": ", 1)[1], "steps": r.check.steps, "equal": r.equal,
                "kafka": r.answers("kafka") if r.error is None else r.error,
                "kbroker": r.answers("kbroker") if r.error is None else r.error})
    return {"apis": apis, "kbroker_only": kbroker_only_versions(), "coordinator": tables}
