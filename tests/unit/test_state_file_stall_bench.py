"""Smoke test of `python -m bench.state_file_stall` against a real broker: its fill (more than one
request of 10,000) and its five small changes are all answered without error. No timing asserts:
the figures are the command's."""

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
