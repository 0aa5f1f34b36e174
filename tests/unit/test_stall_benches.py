"""Smoke tests of `python -m bench.state_file_stall`, `python -m bench.offset_search_stall` and
`python -m bench.commit_stall` against a real broker: the quota and SCRAM fills (more than one request
of 10,000) and their five small changes are answered without error, the search through a costly
batch finds its last record, and a commit too large for one batch is answered UNKNOWN_SERVER_ERROR.
No timing asserts: the figures are the commands'."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.bench import brokers, state_file_stall


def _against_a_fresh_broker(run):
    """What `run(bootstrap)`, a bench's coroutine, gives against a fresh broker, stopped after."""
    handle = brokers.start_kbroker(flush="never")
    try:
        return asyncio.run(run(handle.bootstrap))
    finally:
        handle.stop()


@pytest.mark.parametrize("file", ["quotas", "scram"])
def test_a_state_file_stall_is_measured_against_a_real_broker(file: str) -> None:
    result = _against_a_fresh_broker(lambda bootstrap: state_file_stall._run(bootstrap, state_file_stall.BOUND + 5,
                                                                             file))
    assert len(result["alter_s"]) == 5 and result["worst_ms"] > 0


def test_the_offset_search_stall_is_measured_against_a_real_broker() -> None:
    from kbroker.bench import offset_search_stall

    result = _against_a_fresh_broker(lambda bootstrap: offset_search_stall._run(bootstrap, 70_000))
    assert (result["error"], result["offset"]) == (0, 69_999)


def test_the_commit_stall_is_measured_against_a_real_broker() -> None:
    from kbroker.bench import commit_stall

    took, worst, codes = _against_a_fresh_broker(lambda bootstrap: commit_stall._run(bootstrap, 30_000, 2, 10))
    assert codes == {-1} and took > 0 and worst > 0
