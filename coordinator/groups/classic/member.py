"""A classic-protocol group member (Kafka's MemberMetadata / ClassicGroupMember)."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

# Whatever the caller passed to be answered later (an asyncio future in the service, a plain
# token in tests). The coordinator never looks inside it. It must not be None: None means
# "nobody is waiting".
Handle = Any

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # Ordered by the client's preference; the order decides its vote.
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Handle | None = None
    awaiting_sync: Handle | None = None
    # A member that has not completed a join yet: it cannot heartbeat (it has no member id to
    # send), so it is allowed the new-member join timeout instead of the session timeout.
    is_new: bool = False
    protocol_names: frozenset[str] = field(init=False)
    # The op re-arming this member's session timer (outcome.ScheduleTimer), made once: every
    # heartbeat and commit of the member asks for the same one (rebalance.schedule_heartbeat).
    session_timer: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.protocol_names = frozenset(name for name, _ in self.protocols)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def set_protocols(self, protocols: Protocols) -> None:
        self.protocols = protocols
        self.protocol_names = frozenset(name for name, _ in protocols)

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a heartbeat deadline passing should spare this member.

        A member parked in JoinGroup or SyncGroup cannot heartbeat, so waiting counts as alive;
        a new member never does, or a client that gave up on a long rebalance would linger.
        """
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return self.protocols == protocols

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: Set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
