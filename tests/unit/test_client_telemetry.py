"""The client telemetry store's clock and bounds, on a manual clock (broker/operations/client_telemetry.py);
the APIs themselves are tested with real clients in tests/integration/test_client_telemetry.py."""

from __future__ import annotations

import uuid

from kbroker.broker.operations import client_telemetry as ct
from kbroker.protocol.errors import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_an_instance_no_client_asks_about_is_forgotten_after_three_intervals():
    clock = Clock()
    store = ct.ClientTelemetry(push_interval_ms=30_000, max_bytes=1024, clock_ms=clock)
    first = store.get_subscriptions(uuid.UUID(int=0), "c", "127.0.0.1:1", "User:ANONYMOUS")
    clock.now += 89_999
    assert first.instance_id in store.instances
    clock.now += 2  # max(60 s, 3 x 30 s) after the last request
    list(store.families())
    assert first.instance_id not in store.instances


def test_instances_are_bounded_least_recently_heard_from_first(monkeypatch):
    monkeypatch.setattr(ct, "MAX_INSTANCES", 3)
    store = ct.ClientTelemetry(push_interval_ms=1000, max_bytes=1024, clock_ms=Clock())
    ids = [store.get_subscriptions(uuid.UUID(int=0), f"c{i}", "p:1", "User:x").instance_id for i in range(5)]
    assert list(store.instances) == ids[2:]


def test_the_subscription_id_is_kafkas():
    """ClientMetricsManager.computeSubscriptionId for the set {"*"}, 30 s: CRC32C("[*]30000") XOR the
    instance id's Java hash, as a signed int."""
    instance = uuid.UUID("00000000-0000-0001-0000-000000000002")
    from kbroker.protocol.crc import crc32c

    expected = crc32c(b"[*]30000") ^ ((1 ^ 2) & 0xFFFFFFFF)
    expected = expected - (1 << 32) if expected >= 1 << 31 else expected
    assert ct.subscription_id(["*"], 30000, instance) == expected


def test_a_push_before_any_get_has_an_unknown_subscription():
    store = ct.ClientTelemetry(push_interval_ms=1000, max_bytes=1024, clock_ms=Clock())
    error = store.push(uuid.uuid4(), 12345, False, 0, b"", "c", "p:1", "User:x")
    assert error == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
