"""The consumer group type (KIP-848) as the shard registers it, its machine imported with first use.

consumer_machine.ConsumerGroups and what it imports (heartbeat, reconciliation, assignors, migration,
the consumer records' codec) are a fifth of the coordinator's code and import time, and a broker that
serves only classic groups never runs them. This stands in the registry (registry.py) with the
type's static parts (its commands, records and follow-ups, all from light modules) and imports the
machine when the shard first hands it something: a command of the consumer protocol, a consumer
group record. Until then there is no consumer group in the store, so nothing else comes its way.
Every other attribute is the machine's (loaded on first access).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....protocol.errors import ErrorCode
from ....protocol.records.consumer_records import CONSUMER_RECORD_TYPES
from ...runtime.outcome import Outcome
from .. import commands as c
from ..context import Ctx
from ..group_types import TypeContext
from . import consumer_commands as cc
from .consumer_group import CONSUMER_GROUP_TYPE
from .downgrade import DowngradedToClassic, JoinAfterConsumerGroupDeleted

if TYPE_CHECKING:
    from .consumer_machine import ConsumerGroups


class ConsumerGroupsOnDemand:
    name = CONSUMER_GROUP_TYPE
    commands: tuple[type, ...] = cc.CONSUMER_REQUESTS + cc.CONSUMER_EXPIRIES
    also_handles: tuple[type, ...] = (c.JoinGroup, c.SyncGroup, c.Heartbeat, c.LeaveGroup)
    records: tuple[type, ...] = CONSUMER_RECORD_TYPES
    follow_ups: tuple[type, ...] = (DowngradedToClassic, JoinAfterConsumerGroupDeleted, cc.ExpireSessionsNext)

    def __init__(self, ctx: TypeContext) -> None:
        self._ctx = ctx
        self._machine: ConsumerGroups | None = None

    @property
    def loaded(self) -> bool:
        return self._machine is not None

    def machine(self) -> ConsumerGroups:
        if self._machine is None:
            from .consumer_machine import ConsumerGroups

            self._machine = ConsumerGroups(self._ctx)
        return self._machine

    def __getattr__(self, name: str) -> Any:  # anything else a caller (or a test) reads of the machine
        if name.startswith("__") or name in ("_ctx", "_machine"):
            raise AttributeError(name)
        return getattr(self.machine(), name)

    # -- the GroupType protocol ----------------------------------------------------------------

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        return self.machine().handle(cmd, group, now_ms)

    def replay(self, record: Any) -> None:
        self.machine().replay(record)

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        return self.machine().on_write_done(follow_up, error, now_ms)

    def offset_committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        return None

    def offsets_gone_while_loading(self, group: Any) -> None:
        return None

    def drop(self, group: Any) -> None:
        self.machine().drop(group)

    def status(self, group: Any, wall_ms: int) -> dict[str, Any]:
        return self.machine().status(group, wall_ms)

    def begin_load(self) -> None:
        return None  # the shard empties the store

    def finish_load(self, now_ms: int) -> Outcome:
        return self._machine.finish_load(now_ms) if self._machine is not None else Outcome()

    def unload(self, now_ms: int) -> Outcome:
        return self._machine.unload(now_ms) if self._machine is not None else Outcome()
