"""group_wire.reply: how a plain group handler turns the coordinator's future into its answer."""

from __future__ import annotations

import asyncio

from kbroker.broker import group_wire
from kbroker.broker.router import Deferred, RequestContext
from kbroker.protocol.errors import ErrorCode


def _ctx() -> RequestContext:
    return RequestContext(12, 4, 1, "c", "127.0.0.1:1", None)


def _ok(result: str) -> str:
    return "answered " + result


def _error(code: ErrorCode) -> str:
    return "error " + code.name


async def test_an_answered_command_is_answered_at_once_and_a_pending_one_later() -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    done.set_result("refused")
    assert group_wire.reply(_ctx(), done, _ok, _error) == "answered refused"
    assert group_wire.reply(_ctx(), "direct", _ok, _error) == "answered direct"  # submit_now's result
    pending = loop.create_future()
    answer = group_wire.reply(_ctx(), pending, _ok, _error)
    assert isinstance(answer, Deferred)
    pending.set_result("later")
    assert await answer.response == "answered later"


async def test_a_failed_or_cancelled_command_gets_the_apis_error_shape() -> None:
    loop = asyncio.get_running_loop()
    failing = loop.create_future()
    failed = group_wire.reply(_ctx(), failing, _ok, _error)
    failing.set_exception(RuntimeError("a bug in the coordinator"))
    assert await failed.response == "error UNKNOWN_SERVER_ERROR"
    cancelled = loop.create_future()
    gone = group_wire.reply(_ctx(), cancelled, _ok, _error)
    cancelled.cancel()
    assert await gone.response == "error COORDINATOR_NOT_AVAILABLE"
    bad = loop.create_future()
    broken = group_wire.reply(_ctx(), bad, lambda r: 1 / 0, _error)  # building the answer fails
    bad.set_result("x")
    assert await broken.response == "error UNKNOWN_SERVER_ERROR"
