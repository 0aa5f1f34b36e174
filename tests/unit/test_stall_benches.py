"""Smoke tests of `python -m bench.state_file_stall` and `python -m bench.offset_search_stall` against
a real broker: the quota and SCRAM fills (more than one request of 10,000) and their five small
changes are answered without error, and the search through a costly batch finds its last record. No timing
asserts: the figures are the commands'."""

from __future__ import annotations

import asyncio

from kbroker.bench import brokers, state_file_stall


def test_the_quota_file_stall_is_measured_against_a_real_broker() -> None:
    handle = brokers.start_kbroker(flush="never")
    try:
        result = asyncio.run(state_file_stall._run(handle.bootstrap, state_file_stall.BOUND + 5))
    finally:
        handle.stop()
    assert len(result["alter_s"]) == 5 and result["worst_ms"] > 0


def test_the_scram_file_stall_is_measured_against_a_real_broker() -> None:
    handle = brokers.start_kbroker(flush="never")
    try:
        result = asyncio.run(state_file_stall._run(handle.bootstrap, state_file_stall.BOUND + 5, "scram"))
    finally:
        handle.stop()
    assert len(result["alter_s"]) == 5 and result["worst_ms"] > 0


def test_the_offset_search_stall_is_measured_against_a_real_broker() -> None:
    from kbroker.bench import offset_search_stall

    handle = brokers.start_kbroker(flush="never")
    try:
        result = asyncio.run(offset_search_stall._run(handle.bootstrap, 70_000))
    finally:
        handle.stop()
    assert (result["error"], result["offset"]) == (0, 69_999)
