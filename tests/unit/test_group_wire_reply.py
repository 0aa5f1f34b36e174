"""group_wire.reply: how a plain group handler turns the coordinator's future into its answer."""

from __future__ import annotations

import asyncio

from kbroker.broker.apis import group_wire
from kbroker.broker.network.router import Deferred, RequestContext
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


class _Coordinator:
    """Takes the future it is handed, as GroupCoordinatorService.submit does (or answers at once)."""

    def __init__(self, answer_now: str | None = None) -> None:
        self.answer_now = answer_now
        self.futures: list[asyncio.Future] = []
        self.loop = asyncio.get_running_loop()  # the service keeps the loop it serves on from its start

    def submit(self, cmd: object, future: asyncio.Future) -> asyncio.Future:
        assert future.get_loop() is self.loop
        self.futures.append(future)
        if self.answer_now is not None:
            future.set_result(self.answer_now)
        return future


def _ctx_with(coordinator: object) -> RequestContext:
    from types import SimpleNamespace

    return RequestContext(8, 8, 1, "c", "127.0.0.1:1", SimpleNamespace(coordinator=coordinator))  # type: ignore[arg-type]


async def test_submit_answering_builds_the_response_where_the_result_is_delivered() -> None:
    assert group_wire.submit_answering(_ctx_with(_Coordinator("refused")), object(), _ok, _error) == "answered refused"
    coordinator = _Coordinator()
    answer = group_wire.submit_answering(_ctx_with(coordinator), object(), _ok, _error)
    assert isinstance(answer, Deferred)
    coordinator.futures[0].set_result("durable")  # what the runtime's deliver does
    assert answer.response.done()  # no loop turn between the result and the response
    assert await answer.response == "answered durable"


async def test_submit_answering_gives_the_apis_error_shape_on_a_failure() -> None:
    coordinator = _Coordinator()
    failed = group_wire.submit_answering(_ctx_with(coordinator), object(), _ok, _error)
    coordinator.futures[0].set_exception(RuntimeError("a bug in the coordinator"))
    assert await failed.response == "error UNKNOWN_SERVER_ERROR"
    broken = group_wire.submit_answering(_ctx_with(coordinator), object(), lambda r: 1 / 0, _error)
    coordinator.futures[1].set_result("x")
    assert await broken.response == "error UNKNOWN_SERVER_ERROR"


async def test_submit_answering_when_a_test_control_delays_the_answer() -> None:
    class Delaying(_Coordinator):
        def submit(self, cmd: object, future: asyncio.Future) -> asyncio.Future:
            self.futures.append(future)

            async def later() -> object:
                return await future

            return asyncio.ensure_future(later())

    coordinator = Delaying()
    answer = group_wire.submit_answering(_ctx_with(coordinator), object(), _ok, _error)
    assert isinstance(answer, Deferred)
    coordinator.futures[0].set_result("late")
    assert await answer.response == "answered late"
