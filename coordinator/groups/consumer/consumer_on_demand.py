"""A partition's consumer groups (KIP-848), whose machine is imported with their first command or record.

consumer_machine.ConsumerGroups and what it imports (heartbeat, reconciliation, assignors, migration,
the consumer records' codec) are a fifth of the coordinator's code and import time, and a broker that
serves only classic groups never runs them. This stands in the shard's `group_types` (group_types.py)
and imports the machine when a command of the consumer protocol or a consumer-group record arrives;
until then it has no groups, so it owns no shared command (offsets, DescribeGroups, ...), replays no
offsets, and lists nothing. Every other attribute is the machine's (loaded on first access).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from . import consumer_commands as cc
from ...config import GroupConfig, default_max_batch_bytes
from .consumer_group import no_topics
from ....protocol.records.consumer_records import is_consumer_record

_CONSUMER_COMMANDS = cc.CONSUMER_REQUESTS + cc.CONSUMER_EXPIRIES  # asked of every command: made once
from ...runtime.outcome import Outcome
from ..results import ListedGroup

if TYPE_CHECKING:
    from .consumer_group import ConsumerGroup, TopicImage
    from .consumer_machine import ConsumerGroups
    from ..classic.group import ClassicGroup

_NO_GROUPS: Mapping[str, ConsumerGroup] = MappingProxyType({})


class ConsumerGroupsOnDemand:
    def __init__(self, partition: int, config: GroupConfig, classic_groups: dict[str, ClassicGroup],
                 topics: Callable[[], Mapping[str, TopicImage]] = no_topics,
                 max_batch_bytes: Callable[[], int] = default_max_batch_bytes) -> None:
        self._args = (partition, config, classic_groups, topics, max_batch_bytes)
        self._machine: ConsumerGroups | None = None
        self.groups: Mapping[str, ConsumerGroup] = _NO_GROUPS  # the machine's dict once loaded

    @property
    def loaded(self) -> bool:
        return self._machine is not None

    def machine(self) -> ConsumerGroups:
        if self._machine is None:
            from .consumer_machine import ConsumerGroups

            self._machine = ConsumerGroups(*self._args)
            self.groups = self._machine.groups
        return self._machine

    def __getattr__(self, name: str) -> Any:  # anything else a caller (or a test) reads of the machine
        if name.startswith("__") or name in ("_args", "_machine"):
            raise AttributeError(name)
        return getattr(self.machine(), name)

    # -- the GroupType protocol ----------------------------------------------------------------

    def owns(self, cmd: object) -> bool:
        if self._machine is not None:
            return self._machine.owns(cmd)
        if isinstance(cmd, _CONSUMER_COMMANDS):
            return self.machine().owns(cmd)
        return False  # no consumer group yet: every group id is a classic one's

    def handle(self, cmd: object, now_ms: int) -> Outcome:
        return self.machine().handle(cmd, now_ms)

    def replays(self, record: object) -> bool:
        if self._machine is not None:
            return self._machine.replays(record)
        if is_consumer_record(record):
            return self.machine().replays(record)
        return False  # offsets of a group that is no consumer group

    def replay(self, record: object) -> None:
        self.machine().replay(record)

    def begin_load(self) -> None:
        if self._machine is not None:
            self._machine.begin_load()

    def finish_load(self, now_ms: int) -> Outcome:
        return self._machine.finish_load(now_ms) if self._machine is not None else Outcome()

    def unload(self, now_ms: int) -> Outcome:
        return self._machine.unload(now_ms) if self._machine is not None else Outcome()

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> list[ListedGroup]:
        return self._machine.list_groups(states_filter, types_filter) if self._machine is not None else []
