"""The share group type as the shard registers it (group_types.GroupType): ShareGroupHeartbeat (join,
heartbeat, leave), the session timeout, ShareGroupDescribe (Kafka's GroupMetadataManager for share
groups: shareGroupHeartbeat, shareGroupLeave, shareGroupFenceMember, shareGroupDescribe).

Handlers never change a group: they compute the records describing the change, and the reply that
follows from it, from the group as it is; the runtime appends them and replays them (share_group.replay),
then releases the reply.

One difference from Kafka, on one node: Kafka assigns a share-partition only once the share
coordinator has initialized its state (InitializeShareGroupState, an RPC after the heartbeat that
subscribed to it, so the assignment comes a heartbeat later). Here the share coordinator is in the
same process and a share-partition's state starts at its first fetch (its start offset from
`share.auto.offset.reset`, as Kafka's does for an uninitialized state): the heartbeat that subscribes
records the partitions as initialized (ShareGroupStatePartitionMetadata) and assigns them at once.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from ....protocol.errors import ErrorCode
from ....protocol.records import share_records as sr
from ...runtime.outcome import Outcome
from ..events import ShareAssignmentChanged, ShareMemberGone
from ..group_types import ApiError, NoFollowUps, TypeContext, answer_heartbeat
from . import share_commands as sc
from .assignor import assign
from .share_group import ShareGroup, ShareGroupMember, replay

E = ErrorCode
ASSIGNOR_NAME = "simple"


def metadata_hash(names: set[str], image: Mapping[str, Any]) -> int:
    """A stable 64-bit digest of the subscribed topics as they exist (id, name, partitions), like
    KIP-1101's MetadataHash: it changes when a subscribed topic appears, goes or grows."""
    present = sorted(n for n in names if n in image)
    if not present:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in present:
        t = image[name]
        h.update(f"{t.topic_id}|{name}|{t.num_partitions};".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def validate(cmd: sc.ShareGroupHeartbeat) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
    if cmd.member_id == "":
        raise ApiError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if cmd.group_id == "":
        raise ApiError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if cmd.rack_id == "":
        raise ApiError(E.INVALID_REQUEST, "RackId can't be empty.")
    if cmd.member_epoch == 0:
        if not cmd.subscribed_topic_names:
            raise ApiError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif cmd.member_epoch < sc.LEAVE_GROUP_MEMBER_EPOCH:
        raise ApiError(E.INVALID_REQUEST, "MemberEpoch is invalid.")


class ShareGroups(NoFollowUps):
    name = sc.SHARE_GROUP_TYPE
    commands: tuple[type, ...] = sc.SHARE_REQUESTS + sc.SHARE_EXPIRIES
    also_handles: tuple[type, ...] = ()
    records: tuple[type, ...] = sr.SHARE_RECORD_CLASSES
    follow_ups: tuple[type, ...] = ()

    def __init__(self, ctx: TypeContext) -> None:
        self.store = ctx.groups
        self.groups = ctx.groups.of_type(ShareGroup)
        self.config = ctx.config
        self.topics = ctx.topics
        self._group_config = ctx.group_config

    def session_timeout_ms(self, group_id: str) -> int:
        """Kafka's shareGroupSessionTimeoutMs: the group's share.session.timeout.ms, else the broker's."""
        value = self._group_config(group_id, "share.session.timeout.ms")
        return int(value) if value is not None else self.config.group_share_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """Kafka's shareGroupHeartbeatIntervalMs: the group's share.heartbeat.interval.ms, else the broker's."""
        value = self._group_config(group_id, "share.heartbeat.interval.ms")
        return int(value) if value is not None else self.config.group_share_heartbeat_interval_ms

    # -- commands ------------------------------------------------------------------------------

    def handle(self, cmd: Any, group: Any, now_ms: int) -> Outcome:
        out = Outcome()
        match cmd:
            case sc.ShareGroupHeartbeat():
                def step(out: Outcome, records: list[Any]) -> Any:
                    validate(cmd)
                    if cmd.member_epoch == sc.LEAVE_GROUP_MEMBER_EPOCH:
                        return self._leave(out, records, group, cmd)
                    return self._heartbeat(out, records, group, cmd, now_ms)
                out = answer_heartbeat(cmd.reply_to, step, sc.ShareGroupHeartbeatResult)
            case sc.ShareGroupDescribe():
                out.reply(cmd.reply_to, self._describe(group, cmd.group_id))
            case sc.ShareSessionExpired():
                if group.__class__ is ShareGroup and cmd.member_id in group.members:
                    records: list[Any] = []
                    self._fence(out, records, group, group.members[cmd.member_id], "session expired")
                    out.write(records)
        return out

    def _group(self, group: Any, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup: a group of another type is not taken over."""
        if group is None:
            if not create:
                raise ApiError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            return ShareGroup(group_id)
        if group.__class__ is not ShareGroup:
            raise ApiError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group

    def _heartbeat(self, out: Outcome, records: list[Any], existing: Any, cmd: sc.ShareGroupHeartbeat,
                   now_ms: int) -> sc.ShareGroupHeartbeatResult:
        create = cmd.member_epoch == 0
        group = self._group(existing, cmd.group_id, create)
        gid, member_id = group.group_id, cmd.member_id
        if len(group.members) >= self.config.group_share_max_size and member_id not in group.members:
            raise ApiError(E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of "
                           f"{self.config.group_share_max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
            member = ShareGroupMember(member_id)
        elif cmd.member_epoch != 0:
            _check_epoch(member, cmd.member_epoch)
        is_new = member_id not in group.members

        # 1. The member's metadata and subscription.
        updated = member.replace(
            rack_id=cmd.rack_id if cmd.rack_id is not None else member.rack_id,
            subscribed_topic_names=(tuple(sorted(set(cmd.subscribed_topic_names)))
                                    if cmd.subscribed_topic_names is not None else member.subscribed_topic_names),
            client_id=cmd.client_id, client_host=cmd.client_host)
        bump = False
        reason = "metadata changed"
        if is_new or not updated.metadata_equals(member):
            records.append(sr.ShareGroupMemberMetadataRecord(gid, member_id, updated.rack_id, updated.client_id,
                                                             updated.client_host, updated.subscribed_topic_names))
            bump = is_new or updated.subscribed_topic_names != member.subscribed_topic_names
            reason = "member joined" if is_new else "subscription changed" if bump else reason

        # 2. The group epoch, bumped when a subscription or the subscribed topics changed; the
        #    subscribed share-partitions recorded as initialized (see the module's note).
        image = self.topics()
        names = group.subscribed_topic_names(joining=updated)
        new_hash = metadata_hash(names, image)
        group_epoch = group.group_epoch
        if bump or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(sr.ShareGroupMetadataRecord(gid, group_epoch, new_hash))
        initialized = dict(group.initialized)
        for name in names:
            topic = image.get(name)
            if topic is not None:
                parts = frozenset(range(topic.num_partitions))
                known = initialized.get(topic.topic_id)
                initialized[topic.topic_id] = (name, parts | (known[1] if known else frozenset()))
        if initialized != group.initialized:
            records.append(sr.ShareGroupStatePartitionMetadataRecord(gid, tuple(
                (t, n, tuple(sorted(ps))) for t, (n, ps) in sorted(initialized.items(), key=lambda kv: str(kv[0])))))

        # 3. The target assignment, computed for the whole group when its epoch moved.
        if group_epoch > group.assignment_epoch:
            target, moved = self._update_target(records, group, group_epoch, updated, None, image, now_ms)
            target_epoch = group_epoch
            members = len(group.members) + is_new
            out.events.append(ShareAssignmentChanged(
                gid, group_epoch, group_epoch, reason, member_id, ASSIGNOR_NAME, moved, members, group.group_epoch,
                (member_id,) if is_new else ()))
        else:
            target, target_epoch = group.target(member_id), group.assignment_epoch

        # 4. The member moves to its target at once: a share member has nothing to revoke.
        reconciled = updated
        if updated.member_epoch != target_epoch or updated.assigned_partitions != target or is_new:
            reconciled = updated.replace(member_epoch=target_epoch, previous_member_epoch=updated.member_epoch,
                                         assigned_partitions=dict(target))
            records.append(sr.ShareGroupCurrentMemberAssignmentRecord(
                gid, member_id, reconciled.member_epoch, reconciled.previous_member_epoch, 0,
                sr.wire_assignment(reconciled.assigned_partitions)))
        out.schedule(sc.session_key(gid, member_id), self.session_timeout_ms(gid),
                     sc.ShareSessionExpired(gid, member_id))
        full = cmd.subscribed_topic_names is not None
        changed = reconciled.assigned_partitions != member.assigned_partitions
        return sc.ShareGroupHeartbeatResult(
            E.NONE, None, member_id, reconciled.member_epoch, self.heartbeat_interval_ms(gid),
            sr.wire_assignment(reconciled.assigned_partitions) if cmd.member_epoch == 0 or full or changed else None)

    def _update_target(self, records: list[Any], group: ShareGroup, group_epoch: int,
                       updated: ShareGroupMember | None, removed: str | None, image: Mapping[str, Any],
                       now_ms: int) -> tuple[dict[uuid.UUID, frozenset[int]], tuple[str, ...]]:
        """The new target of the whole group: `updated`'s target, and the members whose target moved."""
        members = dict(group.members)
        if removed is not None:
            members.pop(removed, None)
        if updated is not None:
            members[updated.member_id] = updated
        subscriptions = {m: frozenset(image[n].topic_id for n in member.subscribed_topic_names if n in image)
                         for m, member in members.items()}
        partitions = {t.topic_id: t.num_partitions for t in image.values()}
        result = assign(subscriptions, partitions, {m: group.target(m) for m in members})
        moved = []
        for member_id in sorted(members):
            new = result.get(member_id, {})
            if new != group.target(member_id) or member_id not in group.target_assignment:
                records.append(sr.ShareGroupTargetAssignmentMemberRecord(group.group_id, member_id,
                                                                         sr.wire_assignment(new)))
                moved.append(member_id)
        records.append(sr.ShareGroupTargetAssignmentMetadataRecord(group.group_id, group_epoch, now_ms))
        return (result.get(updated.member_id, {}) if updated is not None else {}), tuple(moved)

    def _leave(self, out: Outcome, records: list[Any], existing: Any,
               cmd: sc.ShareGroupHeartbeat) -> sc.ShareGroupHeartbeatResult:
        group = self._group(existing, cmd.group_id, False)
        member = group.members.get(cmd.member_id)
        if member is None:
            raise ApiError(E.UNKNOWN_MEMBER_ID, f"Member {cmd.member_id} is not a member of group {group.group_id}.")
        self._fence(out, records, group, member, "member left")
        return sc.ShareGroupHeartbeatResult(E.NONE, None, cmd.member_id, cmd.member_epoch)

    def _fence(self, out: Outcome, records: list[Any], group: ShareGroup, member: ShareGroupMember,
               reason: str) -> None:
        """Kafka's shareGroupFenceMember: the member's records go and the group epoch moves on; the
        others get their new targets with their next heartbeat (computed then, as Kafka does)."""
        gid, member_id = group.group_id, member.member_id
        records.append(sr.ShareGroupTombstone(sr.CURRENT_MEMBER_ASSIGNMENT, gid, member_id))
        records.append(sr.ShareGroupTombstone(sr.TARGET_ASSIGNMENT_MEMBER, gid, member_id))
        records.append(sr.ShareGroupTombstone(sr.MEMBER_METADATA, gid, member_id))
        image = self.topics()
        group_epoch = group.group_epoch + 1
        records.append(sr.ShareGroupMetadataRecord(gid, group_epoch,
                                                   metadata_hash(group.subscribed_topic_names(leaving=member_id), image)))
        if len(group.members) == 1:
            records.append(sr.ShareGroupTargetAssignmentMetadataRecord(gid, group_epoch, 0))
        out.cancel(sc.session_key(gid, member_id))
        out.events.append(ShareMemberGone(gid, member_id, len(group.members) - 1, reason == "member left"))
        out.events.append(ShareAssignmentChanged(
            gid, group_epoch, group.assignment_epoch, reason, member_id, ASSIGNOR_NAME, (), len(group.members) - 1,
            group.group_epoch, (), (member_id,),
            self.session_timeout_ms(gid) if reason == "session expired" else None))

    def _describe(self, group: Any, group_id: str) -> sc.DescribedShareGroup:
        # Kafka's shareGroup(groupId, committedOffset), whose words differ from the heartbeat's
        if group is None:
            return sc.DescribedShareGroup(group_id, E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.__class__ is not ShareGroup:
            return sc.DescribedShareGroup(group_id, E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.",
                                          other_type=True)
        share = group
        names = {t.topic_id: n for n, t in self.topics().items()}
        return sc.DescribedShareGroup(
            group_id, E.NONE, None, share.state, share.group_epoch, share.assignment_epoch, ASSIGNOR_NAME,
            tuple(sc.DescribedShareMember(
                m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, m.subscribed_topic_names,
                tuple(sc.DescribedSharePartitions(t, names.get(t, ""), ps)
                      for t, ps in sr.wire_assignment(m.assigned_partitions)))
                for m in share.members.values()),
            initialized=tuple((t, tuple(sorted(ps))) for t, (_, ps) in share.initialized.items()))

    # -- the GroupType protocol's other duties -------------------------------------------------

    def replay(self, record: Any) -> None:
        replay(self.groups, record, self._create)

    def _create(self, group_id: str) -> ShareGroup:
        group = ShareGroup(group_id)
        self.store.put(group)
        return group

    def status(self, group: ShareGroup, wall_ms: int) -> dict[str, Any]:
        return {
            "group_id": group.group_id, "group_type": sc.SHARE_GROUP_TYPE, "state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "session_timeout_ms": self.session_timeout_ms(group.group_id),
            "heartbeat_interval_ms": self.heartbeat_interval_ms(group.group_id),
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                         "member_epoch": m.member_epoch,
                         "assignment": {str(t): sorted(ps) for t, ps in m.assigned_partitions.items()}}
                        for m in group.members.values()],
        }

    def begin_load(self) -> None:
        return None

    def finish_load(self, now_ms: int) -> Outcome:
        """As Kafka's onLoaded: every member gets a fresh session timeout."""
        out = Outcome()
        for group in self.groups.values():
            for member_id in group.members:
                out.schedule(sc.session_key(group.group_id, member_id), self.session_timeout_ms(group.group_id),
                             sc.ShareSessionExpired(group.group_id, member_id))
        return out

    def unload(self, now_ms: int) -> Outcome:
        out = Outcome()
        for group in self.groups.values():
            for member_id in group.members:
                out.cancel(sc.session_key(group.group_id, member_id))
        return out


def _check_epoch(member: ShareGroupMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise ApiError(E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch ({received}) "
                       f"than the one known by the group coordinator ({member.member_epoch}). "
                       "The member must abandon all its partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise ApiError(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch ({received}) "
                       f"than the one known by the group coordinator ({member.member_epoch}), and it does not match "
                       f"the previous member epoch ({member.previous_member_epoch}). "
                       "The member must abandon all its partitions and rejoin.")
