"""Fetch sessions (KIP-227): contexts, epochs, incremental change tracking, eviction."""

from __future__ import annotations

import random

from kbroker.broker.apis.fetch_sessions import (
    INT32_MAX,
    FetchSessionCache,
    FetchSessionManager,
    FetchTarget,
    PartitionResult,
    next_epoch,
)
from kbroker.protocol.errors import ErrorCode

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def targets(*keys, offset=0):
    return [(k, FetchTarget(offset, 1000)) for k in keys]


def results(ctx, data=None, hw=10, lso=0, errors=None):
    data, errors = data or {}, errors or {}
    return [(k, PartitionResult(errors.get(k, ErrorCode.NONE), hw, lso, data.get(k, b""))) for k, _ in ctx.targets]


def open_session(mgr, keys=(A0, A1, B0), now=0):
    ctx = mgr.new_context(0, 0, targets(*keys), [], uses_topic_ids=False, now_ms=now)
    assert ctx.kind == "full"
    out = ctx.respond(results(ctx))
    assert len(out) == len(keys) and ctx.session_id != 0
    return ctx.session_id


def test_sessionless_fetch():
    mgr = FetchSessionManager()
    ctx = mgr.new_context(0, -1, targets(A0), [], uses_topic_ids=False, now_ms=0)
    assert ctx.kind == "sessionless"
    assert ctx.respond(results(ctx)) and ctx.session_id == 0
    assert len(mgr.cache) == 0


def test_versions_without_sessions_are_sessionless():
    mgr = FetchSessionManager()
    ctx = mgr.new_context(0, 0, targets(A0), [], uses_topic_ids=False, now_ms=0, sessions_supported=False)
    assert ctx.kind == "sessionless" and ctx.session_id == 0


def test_incremental_fetch_returns_only_changed_partitions():
    mgr = FetchSessionManager()
    sid = open_session(mgr)
    ctx = mgr.new_context(sid, 1, [], [], uses_topic_ids=False, now_ms=1)
    assert ctx.kind == "incremental" and [k for k, _ in ctx.targets] == [A0, A1, B0]
    assert ctx.respond(results(ctx)) == []  # nothing changed
    ctx = mgr.new_context(sid, 2, [], [], uses_topic_ids=False, now_ms=2)
    out = ctx.respond(results(ctx, data={A1: b"records"}))
    assert [k for k, _ in out] == [A1]
    ctx = mgr.new_context(sid, 3, [], [], uses_topic_ids=False, now_ms=3)
    assert [k for k, _ in ctx.respond(results(ctx, hw=11))] == [A0, B0, A1]  # A1 rotated to the back
    ctx = mgr.new_context(sid, 4, [], [], uses_topic_ids=False, now_ms=4)
    assert [k for k, _ in ctx.respond(results(ctx, hw=11, lso=5))] == [A0, B0, A1]  # log start moved


def test_errors_are_always_sent_and_resent_when_they_clear():
    mgr = FetchSessionManager()
    sid = open_session(mgr)
    ctx = mgr.new_context(sid, 1, [], [], uses_topic_ids=False, now_ms=1)
    out = ctx.respond(results(ctx, errors={B0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}))
    assert [k for k, _ in out] == [B0]
    ctx = mgr.new_context(sid, 2, [], [], uses_topic_ids=False, now_ms=2)
    assert [k for k, _ in ctx.respond(results(ctx))] == [B0]  # error gone: its state is sent again


def test_request_updates_adds_and_forgets_partitions():
    mgr = FetchSessionManager()
    sid = open_session(mgr, keys=(A0, A1))
    ctx = mgr.new_context(sid, 1, [(A0, FetchTarget(42, 500)), (B0, FetchTarget(7, 500))], [A1],
                          uses_topic_ids=False, now_ms=1)
    assert dict(ctx.targets) == {A0: FetchTarget(42, 500), B0: FetchTarget(7, 500)}
    out = ctx.respond(results(ctx))
    assert [k for k, _ in out] == [B0]  # new partition: sent; A0 only changed its fetch offset
    ctx = mgr.new_context(sid, 2, [], [], uses_topic_ids=False, now_ms=2)
    assert ctx.targets[0] == (A0, FetchTarget(42, 500))  # the session remembers the offset


def test_session_errors():
    mgr = FetchSessionManager()
    sid = open_session(mgr)
    assert mgr.new_context(sid + 1, 1, [], [], uses_topic_ids=False, now_ms=1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert mgr.new_context(sid, 5, [], [], uses_topic_ids=False, now_ms=1).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    bad = mgr.new_context(sid, 1, [], [], uses_topic_ids=True, now_ms=1)
    assert bad.error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # the failed attempts did not move the epoch
    assert mgr.new_context(sid, 1, [], [], uses_topic_ids=False, now_ms=1).kind == "incremental"
    assert mgr.new_context(sid, 1, [], [], uses_topic_ids=False, now_ms=1).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_final_epoch_closes_and_initial_epoch_replaces():
    mgr = FetchSessionManager()
    sid = open_session(mgr)
    ctx = mgr.new_context(sid, -1, targets(A0), [], uses_topic_ids=False, now_ms=1)
    assert ctx.kind == "sessionless" and mgr.cache.get(sid) is None
    sid = open_session(mgr)
    ctx = mgr.new_context(sid, 0, targets(A0), [], uses_topic_ids=False, now_ms=2)
    ctx.respond(results(ctx))
    assert mgr.cache.get(sid) is None and mgr.cache.get(ctx.session_id) is not None


def test_epoch_wraps():
    assert next_epoch(INT32_MAX) == 1
    assert next_epoch(5) == 6
    assert next_epoch(-1) == -1


def test_cache_evicts_idle_sessions_then_smaller_ones_and_refuses_otherwise():
    mgr = FetchSessionManager(FetchSessionCache(max_slots=2, eviction_ms=1000, rng=random.Random(1)))
    first = open_session(mgr, keys=(A0,), now=0)
    second = open_session(mgr, keys=(A0, A1), now=10)
    # full and nothing idle; the newcomer is not larger than the smallest: no session
    ctx = mgr.new_context(0, 0, targets(B0), [], uses_topic_ids=False, now_ms=20)
    ctx.respond(results(ctx))
    assert ctx.session_id == 0 and len(mgr.cache) == 2
    # a larger session evicts the smallest one
    ctx = mgr.new_context(0, 0, targets(A0, A1, B0), [], uses_topic_ids=False, now_ms=30)
    ctx.respond(results(ctx))
    assert ctx.session_id != 0 and mgr.cache.get(first) is None and mgr.cache.get(second) is not None
    third = ctx.session_id
    # once the least recently used one has been idle past the eviction time, anything may take its slot
    mgr.new_context(third, 1, [], [], uses_topic_ids=False, now_ms=1500)  # keeps `third` fresh
    ctx = mgr.new_context(0, 0, targets(B0), [], uses_topic_ids=False, now_ms=1500)
    ctx.respond(results(ctx))
    assert ctx.session_id != 0 and mgr.cache.get(second) is None and mgr.cache.get(third) is not None
    assert mgr.cache.evictions == 2
