"""Incremental fetch sessions (KIP-227): the broker remembers a consumer's partitions between fetches.

Request metadata (session id, epoch) selects one of three contexts, as Kafka's FetchManager does:
* epoch -1 (FINAL): sessionless full fetch; a non-zero session id is closed first;
* epoch 0 (INITIAL): full fetch that opens a new session (any session id given is closed first); if
  the cache has no room the response carries session id 0 and the client goes on sessionless;
* epoch > 0: incremental fetch of an existing session. Unknown id -> FETCH_SESSION_ID_NOT_FOUND,
  wrong epoch -> INVALID_FETCH_SESSION_EPOCH. The request adds or updates partitions, forgotten
  topics leave the session, and the response only carries partitions with something new: records,
  an error, or a changed high watermark / log start offset. Partitions that returned records move to
  the back of the session so later partitions get their share of max_bytes next time.

The cache is bounded (Kafka's max.incremental.fetch.session.cache.slots, default 1000). When it is
full a new session may evict the least recently used one if that has been idle for longer than the
eviction time (min.incremental.fetch.session.eviction.ms, 120 s); failing that, the smallest session
(fewest partitions, then least recently used) if the new one is larger. Otherwise no session is made.

Partitions are keyed by `(topic, partition)` where `topic` is the topic name below Fetch v13 and the
topic id (a UUID) from v13 on; the handler resolves ids to names when it reads.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from ..partitions.txn_read import PartitionRead as PartitionResult  # one partition's read
from ...protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
INT32_MAX = 2**31 - 1
DEFAULT_SLOTS = 1000
DEFAULT_EVICTION_MS = 120_000

PartitionKey = tuple[Hashable, int]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class FetchTarget:
    """What the client asked for one partition."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1  # v9+: the leader epoch the client knows (-1: not checked)


@dataclass(slots=True)
class CachedPartition:
    target: FetchTarget
    high_watermark: int = -1  # last value sent; -1 forces the next response to include the partition
    log_start_offset: int = -1

    def must_respond(self, result: PartitionResult, update: bool) -> bool:
        respond = bool(result.records)
        if result.high_watermark != self.high_watermark:
            respond = True
            if update:
                self.high_watermark = result.high_watermark
        if result.log_start_offset != self.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = result.log_start_offset
        if result.error_code != ErrorCode.NONE:
            respond = True
            if update:
                self.high_watermark = -1  # re-send once the error clears
        return respond


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    uses_topic_ids: bool
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)  # insertion order matters
    created_ms: int = 0
    last_used_ms: int = 0

    def __len__(self) -> int:
        return len(self.partitions)


class FetchContext:
    """One request's view: which partitions to read, and how to turn results into the response."""

    def __init__(self, kind: str, targets: list[tuple[PartitionKey, FetchTarget]], *,
                 session: FetchSession | None = None, error: int = ErrorCode.NONE,
                 cache: FetchSessionCache | None = None, uses_topic_ids: bool = False, now_ms: int = 0) -> None:
        self.kind = kind  # "sessionless" | "full" | "incremental" | "error"
        self.targets = targets
        self.session = session
        self.error = error
        self._cache = cache
        self._uses_topic_ids = uses_topic_ids
        self._now_ms = now_ms
        self.session_id = session.session_id if session is not None else INVALID_SESSION_ID

    def respond(self, results: list[tuple[PartitionKey, PartitionResult]]) -> list[tuple[PartitionKey, PartitionResult]]:
        """Results in response order; updates (or, for a full fetch, creates) the session."""
        if self.kind == "error":
            return []
        if self.kind == "sessionless":
            return results
        if self.kind == "full":
            if self._cache is not None:
                cached = {}
                for (key, target), (_, result) in zip(self.targets, results):
                    cp = CachedPartition(target)
                    cp.must_respond(result, True)
                    cached[key] = cp
                session = self._cache.create(cached, self._uses_topic_ids, self._now_ms)
                self.session = session
                self.session_id = session.session_id if session is not None else INVALID_SESSION_ID
            return results
        assert self.session is not None
        out = []
        session = self.session
        for key, result in results:
            known = session.partitions.get(key)
            if known is None:  # forgotten while we waited
                continue
            if known.must_respond(result, True):
                out.append((key, result))
                if result.records:
                    # Rotate: it goes to the back so the others come first next time.
                    del session.partitions[key]
                    session.partitions[key] = known
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int = DEFAULT_SLOTS, eviction_ms: int = DEFAULT_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}  # ordered by last use: oldest first
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self.sessions.pop(session.session_id, None)
        self.sessions[session.session_id] = session

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, INT32_MAX)
            if candidate not in self.sessions:
                return candidate

    def _make_room(self, size: int, now_ms: int) -> bool:
        if len(self.sessions) < self.max_slots:
            return True
        if self.max_slots <= 0:
            return False
        oldest = next(iter(self.sessions.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            victim = min(self.sessions.values(), key=lambda s: (len(s), s.last_used_ms))
            if size <= len(victim):
                return False
        del self.sessions[victim.session_id]
        self.evictions += 1
        return True

    def create(self, partitions: dict[PartitionKey, CachedPartition], uses_topic_ids: bool,
               now_ms: int) -> FetchSession | None:
        if not self._make_room(len(partitions), now_ms):
            return None
        session = FetchSession(self._new_id(), next_epoch(INITIAL_EPOCH), uses_topic_ids, partitions,
                               created_ms=now_ms, last_used_ms=now_ms)
        self.sessions[session.session_id] = session
        return session


class FetchSessionManager:
    def __init__(self, cache: FetchSessionCache | None = None) -> None:
        self.cache = cache if cache is not None else FetchSessionCache()

    def new_context(
        self,
        session_id: int,
        epoch: int,
        targets: list[tuple[PartitionKey, FetchTarget]],
        forgotten: Iterable[PartitionKey],
        *,
        uses_topic_ids: bool,
        now_ms: int,
        sessions_supported: bool = True,
    ) -> FetchContext:
        if not sessions_supported:
            return FetchContext("sessionless", targets)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", targets)
            return FetchContext("full", targets, cache=self.cache, uses_topic_ids=uses_topic_ids, now_ms=now_ms)
        if epoch < FINAL_EPOCH:
            return FetchContext("error", [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session = self.cache.get(session_id)
        if session is None:
            return FetchContext("error", [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext("error", [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext("error", [], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, target in targets:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(target)
            else:
                cached.target = target
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(epoch)
        self.cache.touch(session, now_ms)
        to_read = [(key, cp.target) for key, cp in session.partitions.items()]
        return FetchContext("incremental", to_read, session=session)
