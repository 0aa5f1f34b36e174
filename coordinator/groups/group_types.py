"""What a group is to the group shard, and what a group type provides (Kafka's Group interface and
the per-type halves of GroupMetadataManager).

The shard (shard.py) keeps one map of groups (store.py) and one offset store (offset_store.py) for
every type, and a registry of types (registry.py: classic and consumer today). A type brings:

- its commands (`commands`: requests and timer expiries of its protocol), which the shard hands it
  whatever group their id names: the type refuses a group of another type as Kafka does (JoinGroup
  to a group of another protocol: INCONSISTENT_GROUP_PROTOCOL, ConsumerGroupHeartbeat: "Group g is
  not a consumer group", ...); and the commands of other types it takes for its own groups
  (`also_handles`: a consumer group takes the classic protocol's during a migration);
- its records (`records`), replayed into its groups, and its follow-ups (`follow_ups`), handed back
  to it once the write that carried them is done;
- its groups, each answering the questions every group answers (`Group`): may this member commit,
  fetch, delete offsets; which topics are in use; when do offsets expire; how is the group listed and
  deleted. Offsets themselves, DeleteGroups, ListGroups and the retention check are the shard's, once
  for every type.

A new type is a folder with such a type and a line in registry.py (or, in a test, one more factory
given to the service); neither the shard, the service nor the runtime is edited.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ...protocol.errors import ErrorCode
from ..config import GroupConfig
from ..runtime.outcome import Outcome, Reply
from . import commands as c
from .context import Ctx
from .offset_store import OffsetAndMetadata, OffsetStore
from .results import ListedGroup
from .store import GroupStore


class Group(Protocol):
    group_id: str
    group_type: ClassVar[str]  # the name of its type in the registry ("classic", "consumer")

    def validate_offset_commit(self, cmd: c.OffsetCommit) -> ErrorCode | None:
        """Whether this commit may be written (None) or its error; `cmd.transactional` commits (a
        committed transaction's) and `cmd.validate_only` checks (TxnOffsetCommit's) included."""
        ...

    def validate_offset_fetch(self, cmd: c.OffsetFetch) -> ErrorCode | None: ...

    def validate_offset_delete(self) -> ErrorCode | None: ...

    def validate_delete_group(self) -> ErrorCode | None:
        """Whether DeleteGroups may delete it (None) or its error (NON_EMPTY_GROUP, ...)."""
        ...

    def is_subscribed_to_topic(self, topic: str) -> bool: ...

    def offset_expiration(self) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's offsetExpirationCondition: the time an offset's retention counts from, or None
        while the group keeps every offset."""
        ...

    def is_empty(self) -> bool:
        """No member: the retention check deletes it once its last offset expires."""
        ...

    def tombstones(self) -> list[Any]:
        """Kafka's createGroupTombstoneRecords: the records that delete the group (its offsets apart)."""
        ...

    def listed(self) -> ListedGroup | None:
        """The group as ListGroups shows it (None: not shown, a Dead group)."""
        ...


@dataclass(slots=True)
class TypeContext:
    """What a group type is built with, for one `__consumer_offsets` partition."""

    partition: int
    config: GroupConfig
    groups: GroupStore
    offsets: OffsetStore
    topics: Callable[[], Mapping[str, Any]]  # the topics image (name -> TopicImage)
    max_batch_bytes: Callable[[], int]
    new_member_id: Callable[[str], str]
    # Hand a command to the shard now, as if it had just arrived (a type whose group is gone hands a
    # request over to the type that now owns the id: a JoinGroup after an empty consumer group's
    # deletion is a classic group's).
    handle: Callable[[Any, int], Outcome]
    # A group's dynamic config override (the GROUP config resource: group id, config name such as
    # "streams.num.standby.replicas"), or None where the group has none and the broker's default holds.
    group_config: Callable[[str, str], str | None] = lambda group_id, name: None


class GroupType(Protocol):
    name: str
    commands: tuple[type, ...]
    also_handles: tuple[type, ...]
    records: tuple[type, ...]
    follow_ups: tuple[type, ...]

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        """`group` is whatever the id names in the store (None, one of this type's, another's)."""
        ...

    def replay(self, record: Any) -> None: ...

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome: ...

    def offset_committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        """A commit of one of its groups was accepted (a classic member's commit keeps it alive)."""
        ...

    def offsets_gone_while_loading(self, group: Any) -> None:
        """While loading, the group's last offset was tombstoned (a group known from offsets alone goes)."""
        ...

    def begin_load(self) -> None: ...

    def finish_load(self, now_ms: int) -> Outcome: ...

    def unload(self, now_ms: int) -> Outcome: ...

    def drop(self, group: Any) -> None:
        """The group is deleted (DeleteGroups, retention): mark it dead, take it out of the store."""
        ...

    def status(self, group: Any, wall_ms: int) -> dict[str, Any]:
        """The group as the HTTP endpoint shows it."""
        ...

    # The first registered type also has `simple_group(group_id, now_ms)`: the group that holds
    # offsets committed without group management (Kafka's simple consumer group).


class NoFollowUps:
    """What a group type without follow-ups or offset side effects answers (share and streams groups):
    its writes need nothing after them, a commit or a tombstoned offset changes none of its groups, and a
    deleted group is marked dead and taken out of its store (`self.store`)."""

    store: GroupStore

    def on_write_done(self, follow_up: Any, error: ErrorCode | None, now_ms: int) -> Outcome:
        return Outcome()

    def offset_committed(self, ctx: Ctx, group: Any, cmd: c.OffsetCommit) -> None:
        return None

    def offsets_gone_while_loading(self, group: Any) -> None:
        return None

    def drop(self, group: Any) -> None:
        group.deleted = True
        if self.store.get(group.group_id) is group:
            self.store.remove(group.group_id)


class ApiError(Exception):
    """A group request refused with Kafka's error code and message (its ApiException): what the request's
    step changed is dropped and the member is answered the error."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def answer_heartbeat(reply_to: object, step: Callable[[Outcome, list[Any]], Any],
                     refused: Callable[[ErrorCode, str | None], Any]) -> Outcome:
    """A share or streams group heartbeat's outcome. `step(out, records)` checks the request, then leaves
    or heartbeats, adding to `out` and `records` and returning the answer. Its records are written
    first and the answer waits for their durability (at once when there are none); an ApiError it
    raises answers `refused(code, message)` and keeps nothing of what it did."""
    out = Outcome()
    records: list[Any] = []
    try:
        result = step(out, records)
    except ApiError as exc:
        out = Outcome()
        out.reply(reply_to, refused(exc.code, exc.message))
        return out
    if records:
        out.write(records, [Reply(reply_to, result)] if reply_to is not None else [])
    else:
        out.reply(reply_to, result)
    return out


GroupTypeFactory = Callable[[TypeContext], GroupType]
