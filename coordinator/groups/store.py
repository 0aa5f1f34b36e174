"""One map of a partition's groups, whatever their type (Kafka's GroupMetadataManager.groups): a
group id is one group. Each type reads its own groups through a typed view (`of_type`), so its code
never meets another type's group by mistake; the shard sees them all.

A group id that holds committed offsets always names a group: when a group goes (a consumer group's
tombstone, a classic group's metadata tombstone) while offsets remain, a simple group (an empty
classic group without a protocol, Kafka's "simple consumer group") keeps them, as Kafka creates one
for offsets committed without group management.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

G = TypeVar("G")


class GroupStore(Mapping[str, Any]):
    __slots__ = ("groups", "has_offsets", "simple_group")

    def __init__(self, has_offsets: Callable[[str], bool]) -> None:
        self.groups: dict[str, Any] = {}
        self.has_offsets = has_offsets
        # Makes the group that holds a group id's offsets when no other does (the registry's first
        # type provides it: classic); set by the shard once the types are built.
        self.simple_group: Callable[[str, int], Any] | None = None

    def get(self, group_id: str, default: Any = None) -> Any:
        return self.groups.get(group_id, default)

    def __getitem__(self, group_id: str) -> Any:
        return self.groups[group_id]

    def __contains__(self, group_id: object) -> bool:
        return group_id in self.groups

    def put(self, group: Any) -> None:
        self.groups[group.group_id] = group

    def remove(self, group_id: str) -> None:
        """The group goes; its offsets, if any remain, stay with its id in a simple group."""
        if self.groups.pop(group_id, None) is not None and self.has_offsets(group_id):
            self.hold_offsets(group_id)

    def hold_offsets(self, group_id: str) -> Any:
        """The simple group of `group_id` (made and put now)."""
        assert self.simple_group is not None
        group = self.groups[group_id] = self.simple_group(group_id, 0)
        return group

    def of_type(self, cls: type[G]) -> TypedGroups[G]:
        return TypedGroups(self, cls)

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[str]:
        return iter(self.groups)

    def values(self) -> Any:
        return self.groups.values()

    def clear(self) -> None:
        self.groups.clear()


class TypedGroups(Mapping[str, G], Generic[G]):
    """The groups of one class in a GroupStore, as a mapping: a group id of another type's group is
    not in it. Writes go to the store (one id, one group)."""

    __slots__ = ("_store", "_groups", "_cls")

    def __init__(self, store: GroupStore, cls: type[G]) -> None:
        self._store = store
        self._groups = store.groups
        self._cls = cls

    def get(self, group_id: str, default: Any = None) -> Any:
        group = self._groups.get(group_id)
        return group if group.__class__ is self._cls else default

    def __getitem__(self, group_id: str) -> G:
        group = self._groups.get(group_id)
        if group.__class__ is not self._cls:
            raise KeyError(group_id)
        return group

    def __contains__(self, group_id: object) -> bool:
        return self._groups.get(group_id).__class__ is self._cls  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[str]:
        cls = self._cls
        return iter([gid for gid, g in self._groups.items() if g.__class__ is cls])

    def __len__(self) -> int:
        cls = self._cls
        return sum(1 for g in self._groups.values() if g.__class__ is cls)

    def values(self) -> list[G]:  # type: ignore[override]
        cls = self._cls
        return [g for g in self._groups.values() if g.__class__ is cls]

    def __setitem__(self, group_id: str, group: G) -> None:
        self._store.put(group)

    def __delitem__(self, group_id: str) -> None:
        if group_id not in self:
            raise KeyError(group_id)
        self._store.remove(group_id)

    def __repr__(self) -> str:
        return f"TypedGroups({self._cls.__name__}: {list(self)})"
