"""Smoke test of `python -m bench.hostile_produce`: its costly batches are sound Kafka batches (the
broker must check their records, not refuse their header), and one request's run against a real
broker is answered with every batch taken. No timing asserts: the figures are the benchmark's."""

from __future__ import annotations

import asyncio

from kbroker.bench import brokers, hostile_produce
from kbroker.protocol import record_batch as rb
from kbroker.protocol.record_framing import check_record_framing


def test_the_costly_batches_are_sound_batches_of_what_they_claim() -> None:
    *costly, (_, empty_members, _) = hostile_produce.requests(0.01)
    for _kind, batch, _copies in costly:
        [header] = rb.validate_produced_batches(batch)
        data = rb.decompress(header.compression, batch[rb.HEADER_SIZE:header.size])
        check_record_framing(data, 0, len(data), header.records_count)
    [header] = rb.validate_produced_batches(empty_members)  # header and CRC sound; nothing inside
    assert rb.decompress(header.compression, empty_members[rb.HEADER_SIZE:header.size]) == b""
    assert len(empty_members) > 100 * 32  # many members, not one


def test_one_costly_request_is_measured_against_a_real_broker() -> None:
    handle = brokers.start_kbroker(flush="never")
    try:
        kind, batch, _ = hostile_produce.requests(0.01)[1]
        result = asyncio.run(hostile_produce._one(handle.bootstrap, "smoke", batch, 3))
    finally:
        handle.stop()
    assert result["errors"] == [0], kind
