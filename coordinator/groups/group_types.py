"""What a group type other than classic provides to the partition's shard (classic.GroupStateMachine).

The shard runs classic groups itself and asks each registered type, in order, whether a command or
a record is about one of its groups; load, unload, listing and retention go to every type. A new
type (as consumer_machine.ConsumerGroups is for KIP-848) implements this and is added to the
shard's `group_types`; neither the service nor the runtime changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..runtime.outcome import Outcome
from .results import ListedGroup


class GroupType(Protocol):
    @property
    def groups(self) -> Mapping[str, object]: ...

    def owns(self, cmd: object) -> bool:
        """Whether `cmd` is for one of this type's groups (or creates one)."""
        ...

    def handle(self, cmd: object, now_ms: int) -> Outcome: ...

    def replays(self, record: object) -> bool:
        """Whether `record` belongs to this type (its own record types, or its groups' offsets)."""
        ...

    def replay(self, record: object) -> None: ...

    def begin_load(self) -> None: ...

    def finish_load(self, now_ms: int) -> Outcome: ...

    def unload(self, now_ms: int) -> Outcome: ...

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> list[ListedGroup]: ...
