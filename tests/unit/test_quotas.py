"""Client quotas (broker/operations/quotas.py): Kafka's entity rules, the precedence of quotas and its sampled
byte rate with a manual clock."""

from __future__ import annotations

import pytest

from kbroker.broker.operations import quotas as q


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_entities_are_validated_as_kafka_does():
    with pytest.raises(q.QuotaError):
        q.make_entity([])
    with pytest.raises(q.QuotaError):
        q.make_entity([("user", "a"), ("user", "b")])
    with pytest.raises(q.QuotaError):
        q.make_entity([("ip", "1.2.3.4"), ("user", "a")])
    with pytest.raises(q.QuotaError):
        q.check_value(q.make_entity([("client-id", "c")]), "connection_creation_rate", 1.0)
    with pytest.raises(q.QuotaError):
        q.check_value(q.make_entity([("client-id", "c")]), "producer_byte_rate", 1.5)
    q.check_value(q.make_entity([("client-id", "c")]), "request_percentage", 1.5)


async def test_stored_durably_and_reloaded(tmp_path):
    store = q.ClientQuotas(tmp_path)
    entity = q.make_entity([("client-id", "c"), ("user", None)])
    await store.alter([(entity, [("producer_byte_rate", 100.0, False)])])
    assert q.ClientQuotas(tmp_path).quotas == {entity: {"producer_byte_rate": 100.0}}
    await store.alter([(entity, [("producer_byte_rate", 0.0, True)])])
    assert q.ClientQuotas(tmp_path).quotas == {}


async def test_most_specific_quota_applies(tmp_path):
    store = q.ClientQuotas(tmp_path, clock=Clock())
    await store.alter([
        (q.make_entity([("client-id", None)]), [("producer_byte_rate", 1.0, False)]),
        (q.make_entity([("client-id", "fast")]), [("producer_byte_rate", 1e12, False)]),
    ])
    assert store.record("producer_byte_rate", "fast", 10_000) == 0
    assert store.record("producer_byte_rate", "anyone-else", 10_000) > 0
    assert store.record("consumer_byte_rate", "anyone-else", 10_000) == 0  # no fetch quota set


async def test_throttle_time_is_kafkas_formula_over_the_sampled_window(tmp_path):
    clock = Clock()
    store = q.ClientQuotas(tmp_path, clock=clock)
    await store.alter([(q.make_entity([("client-id", "c")]), [("producer_byte_rate", 1000.0, False)])])
    # Within the first sample the window counts as (11 - 1) full seconds: 10,000 bytes is 1,000/s.
    assert store.record("producer_byte_rate", "c", 10_000) == 0
    # 20,000 bytes over 10 s is 2,000/s, twice the quota: throttle (2000 - 1000) / 1000 * 10 s.
    assert store.record("producer_byte_rate", "c", 10_000) == 10_000
    # Eleven seconds later the old samples have left the window.
    clock.now += 11_000
    assert store.record("producer_byte_rate", "c", 100) == 0


def test_only_clients_before_kip_219_have_their_answer_held_back(monkeypatch):
    import asyncio
    from types import SimpleNamespace

    slept = []

    async def fake_sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr(q.asyncio, "sleep", fake_sleep)
    response = SimpleNamespace(throttle_time_ms=250)
    assert asyncio.run(q.hold_back_for_old_clients(response, 5, 6)) is response
    assert asyncio.run(q.hold_back_for_old_clients(response, 6, 6)) is response
    assert asyncio.run(q.hold_back_for_old_clients(SimpleNamespace(throttle_time_ms=0), 0, 6))
    assert slept == [0.25]
