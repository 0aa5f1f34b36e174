"""Online migration between the classic and the consumer group protocols (KIP-848's upgrade path,
`group.consumer.migration.policy`).

- Upgrade (convertToConsumerGroup): a classic "consumer" group whose member sends a
  ConsumerGroupHeartbeat becomes a consumer group; every classic member keeps its partitions at
  epoch = the classic generation and stays a classic member inside it.
- Classic members inside a consumer group are served through JoinGroup / SyncGroup / Heartbeat /
  LeaveGroup (Kafka's classicGroup*ToConsumerGroup): JoinGroup reconciles the member and answers
  its epoch as the generation, SyncGroup hands out its assigned partitions in the consumer
  protocol's format, Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin.
- Downgrade (convertToClassicGroup): when the last member of the new protocol leaves a group of
  classic members, it becomes a classic group again (GroupMetadata written, then a rebalance).

Committed offsets never move: they belong to the group id whatever its type.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from ....protocol.consumer_protocol import decode_assignment, decode_subscription
from ....protocol.errors import ErrorCode
from ....protocol.messages import consumer_protocol_subscription as cps

from .. import commands as c
from . import consumer_commands as cc
from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicImage,
    assignment_of,
    new_member_id,
)
from .consumer_heartbeat import (
    ApiError,
    CCtx,
    _subscribed_names,
    metadata_hash,
    update_target_assignment,
)
from .downgrade import (
    DowngradedToClassic,
    convert_to_classic_group,
    encode_assignment,
    validate_online_downgrade_with_replaced_member,
)
from ....protocol.records.consumer_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
)
from .consumer_records import current_assignment_record, member_subscription_record, member_tombstones, replay
from ..classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from ...runtime.outcome import Reply
from .reconcile import maybe_reconcile
from ....protocol.records.classic_records import GroupMetadataTombstone
from ..results import HeartbeatResult, JoinGroupResult, LeaveGroupResult, LeaveMemberResult, SyncGroupResult

E = ErrorCode


def _by_name(pairs, image: Mapping[str, TopicImage]) -> dict[uuid.UUID, frozenset[int]]:
    return assignment_of((image[name].topic_id, ps) for name, ps in pairs if name in image)


# -- upgrade --------------------------------------------------------------------------------------


def validate_online_upgrade(ctx: CCtx, classic: ClassicGroup) -> bool:
    policy = ctx.config.group_consumer_migration_policy.lower()
    return (policy in ("upgrade", "bidirectional") and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
            and classic.size <= ctx.config.group_consumer_max_size)


def convert_to_consumer_group(ctx: CCtx, classic: ClassicGroup) -> ConsumerGroup:
    """Records that turn `classic` into a consumer group, and that group as it will be once they
    replay (the caller goes on deciding against it)."""
    gid = classic.group_id
    image = ctx.image()
    epoch = classic.generation_id
    members: list[ConsumerGroupMember] = []
    for m in classic.members.values():  # parse everything first: a malformed member raises here
        subscription = decode_subscription(m.protocols[0][1]) if m.protocols else cps.ConsumerProtocolSubscription()
        assigned = _by_name(((t.topic, t.partitions) for t in decode_assignment(m.assignment).assigned_partitions),
                            image)
        members.append(ConsumerGroupMember(
            m.member_id, member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE,
            instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms, assigned_partitions=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        ))
    # Whoever waits in the classic rebalance must rejoin (completeAllJoin/SyncFutures).
    for member in classic.members.values():
        ctx.out.reply(classic.take_join_handle(member), JoinGroupResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        ctx.out.reply(classic.take_sync_handle(member), SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        ctx.out.cancel(c.heartbeat_key(gid, member.member_id))
    for member_id in classic.pending_members:
        ctx.out.cancel(c.pending_key(gid, member_id))
    ctx.out.cancel(c.join_key(gid))
    ctx.out.cancel(c.sync_key(gid))

    records: list = [GroupMetadataTombstone(gid)]
    for new in members:
        records.append(member_subscription_record(gid, new))
        records.append(ConsumerGroupTargetAssignmentMemberRecord(gid, new.member_id,
                                                                 dict(new.assigned_partitions)))
        records.append(current_assignment_record(gid, new))
        ctx.out.schedule(cc.session_key(gid, new.member_id), new.classic.session_timeout_ms,  # type: ignore[union-attr]
                         cc.ConsumerSessionExpired(gid, new.member_id))
    records.append(ConsumerGroupTargetAssignmentMetadataRecord(gid, epoch, ctx.now_ms))
    tmp: dict[str, ConsumerGroup] = {}
    for r in records[1:]:
        replay(tmp, r, lambda g: tmp.setdefault(g, ConsumerGroup(g)))
    group = tmp[gid]
    names = _subscribed_names(group, None, None, {})
    group.metadata_hash = metadata_hash(names, image)
    group.group_epoch = epoch
    records.append(ConsumerGroupMetadataRecord(gid, epoch, group.metadata_hash))
    ctx.records.extend(records)
    return group


# -- classic members inside a consumer group ------------------------------------------------------


def _supports(group: ConsumerGroup, cmd: c.JoinGroup) -> bool:
    if cmd.protocol_type != CONSUMER_PROTOCOL_TYPE or not cmd.protocols:
        return False
    names = {n for n, _ in cmd.protocols}
    for m in group.members.values():
        if m.classic is not None and m.member_id != cmd.member_id:
            names &= {n for n, _ in m.classic.supported_protocols}
    return bool(names)


def _member_for(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember (+ throwIfMemberDoesNotUseClassicProtocol)."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise ApiError(E.UNKNOWN_MEMBER_ID)
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise ApiError(E.UNKNOWN_MEMBER_ID)
        if member.member_id != member_id:
            raise ApiError(E.FENCED_INSTANCE_ID)
    if member.classic is None:
        raise ApiError(E.UNKNOWN_MEMBER_ID)
    return member


def classic_group_join_to_consumer_group(ctx: CCtx, group: ConsumerGroup, cmd: c.JoinGroup) -> None:
    gid = group.group_id
    member_id = cmd.member_id or new_member_id()  # a Kafka Uuid, as for any member of a consumer group
    try:
        if len(group.members) >= ctx.config.group_consumer_max_size and member_id not in group.members:
            raise ApiError(E.GROUP_MAX_SIZE_REACHED)
        if not _supports(group, cmd):
            raise ApiError(E.INCONSISTENT_GROUP_PROTOCOL)
        if cmd.member_id == c.UNKNOWN_MEMBER_ID and cmd.require_known_member_id:
            ctx.out.reply(cmd.reply_to, JoinGroupResult(E.MEMBER_ID_REQUIRED, member_id))
            return
        existing = group.static_member(cmd.group_instance_id)
        if existing is not None and existing.member_id != member_id:
            # A static member back under a new id takes over the old one's slot.
            member = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            ctx.records.extend(member_tombstones(gid, existing.member_id))
            ctx.records.append(ConsumerGroupTargetAssignmentMemberRecord(gid, member_id,
                                                                         dict(group.target(existing.member_id))))
            replaced = existing
        else:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
            replaced = None
        subscription = decode_subscription(cmd.protocols[0][1])
    except ApiError as exc:
        ctx.records.clear()
        ctx.out.reply(cmd.reply_to, JoinGroupResult(exc.code, cmd.member_id))
        return
    except Exception:  # noqa: BLE001 - a malformed embedded protocol
        ctx.records.clear()
        ctx.out.reply(cmd.reply_to, JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, cmd.member_id))
        return

    image = ctx.image()
    updated = member.replace(
        instance_id=cmd.group_instance_id or member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=cmd.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        client_id=cmd.client_id, client_host=cmd.client_host,
        classic=ClassicMemberMetadata(cmd.session_timeout_ms, tuple(cmd.protocols)),
    )
    is_new = member_id not in group.members and replaced is None
    if not updated.metadata_equals(member) or is_new or replaced is not None:
        ctx.records.append(member_subscription_record(gid, updated))
    names = _subscribed_names(group, member, updated, group.resolved_regexes, replaced)
    new_hash = metadata_hash(names, image)
    group_epoch = group.group_epoch
    reason = "member joined" if is_new else (
        "subscription changed" if not updated.subscription_equals(member) else None)
    if reason is not None or new_hash != group.metadata_hash:
        group_epoch += 1
        ctx.records.append(ConsumerGroupMetadataRecord(gid, group_epoch, new_hash))
    if group_epoch > group.assignment_epoch:
        target = update_target_assignment(ctx, group, group_epoch, member, updated, group.resolved_regexes, names,
                                          reason or "metadata changed",
                                          removed=replaced.member_id if replaced else None)
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        target = group.target(replaced.member_id if replaced else member_id)
    owned = tuple((t, tuple(ps)) for t, ps in _by_name(
        ((tp.topic, tp.partitions) for tp in subscription.owned_partitions), image).items())
    reconciled = maybe_reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
    ctx.records.append(current_assignment_record(gid, reconciled))
    result = JoinGroupResult(E.NONE, member_id, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE,
                             cmd.protocols[0][0], "", False, ())
    if replaced is not None and validate_online_downgrade_with_replaced_member(ctx, group, replaced.member_id):
        # The last new-protocol member was a static member a classic one just replaced: back to classic.
        convert_to_classic_group(ctx, group, replaced.member_id, reconciled)
        ctx.out.write(list(ctx.records), [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [],
                      then=DowngradedToClassic(gid, "static member replaced by a classic member", rebalance=False))
        ctx.records.clear()
        return
    group.classic_join_timers.discard(member_id)
    ctx.out.cancel(cc.join_key(gid, member_id))
    ctx.out.schedule(cc.session_key(gid, member_id), cmd.session_timeout_ms, cc.ConsumerSessionExpired(gid, member_id))
    ctx.out.schedule(cc.sync_key(gid, member_id), cmd.rebalance_timeout_ms,
                     cc.ConsumerClassicTimeout(gid, member_id, "the member failed to sync within timeout"))
    ctx.out.write(list(ctx.records), [Reply(cmd.reply_to, result)] if cmd.reply_to is not None else [])
    ctx.records.clear()


def _must_rejoin(ctx: CCtx, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    if member.member_id not in group.classic_join_timers:
        group.classic_join_timers.add(member.member_id)
        ctx.out.schedule(cc.join_key(group.group_id, member.member_id), max(member.rebalance_timeout_ms, 0),
                         cc.ConsumerClassicTimeout(group.group_id, member.member_id,
                                                   "the classic member failed to join within the rebalance timeout"))


def classic_group_sync_to_consumer_group(ctx: CCtx, group: ConsumerGroup, cmd: c.SyncGroup) -> None:
    try:
        member = _member_for(group, cmd.member_id, cmd.group_instance_id)
        if cmd.generation_id != member.member_epoch:
            raise ApiError(E.ILLEGAL_GENERATION)
        protocol = member.classic.supported_protocols[0][0]  # type: ignore[union-attr]
        if (cmd.protocol_type is not None and cmd.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                cmd.protocol_name is not None and cmd.protocol_name != protocol):
            raise ApiError(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            _must_rejoin(ctx, group, member)
            raise ApiError(E.REBALANCE_IN_PROGRESS)
    except ApiError as exc:
        ctx.out.reply(cmd.reply_to, SyncGroupResult(exc.code))
        return
    classic = member.classic
    assert classic is not None
    version = int.from_bytes(classic.supported_protocols[0][1][:2], "big", signed=True)
    ctx.out.cancel(cc.sync_key(group.group_id, member.member_id))
    ctx.out.schedule(cc.session_key(group.group_id, member.member_id), classic.session_timeout_ms,
                     cc.ConsumerSessionExpired(group.group_id, member.member_id))
    ctx.out.reply(cmd.reply_to, SyncGroupResult(
        E.NONE, CONSUMER_PROTOCOL_TYPE, classic.supported_protocols[0][0],
        encode_assignment(member.assigned_partitions, ctx.image(), version)))


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    for topic_id, partitions in group.target(member.member_id).items():
        have = member.assigned_partitions.get(topic_id, frozenset())
        for p in partitions - have:
            if group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False


def classic_group_heartbeat_to_consumer_group(ctx: CCtx, group: ConsumerGroup, cmd: c.Heartbeat) -> None:
    try:
        member = _member_for(group, cmd.member_id, cmd.group_instance_id)
        if cmd.generation_id != member.member_epoch:
            raise ApiError(E.ILLEGAL_GENERATION)
    except ApiError as exc:
        ctx.out.reply(cmd.reply_to, HeartbeatResult(exc.code))
        return
    assert member.classic is not None
    ctx.out.schedule(cc.session_key(group.group_id, member.member_id), member.classic.session_timeout_ms,
                     cc.ConsumerSessionExpired(group.group_id, member.member_id))
    error = E.NONE
    if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))):
        error = E.REBALANCE_IN_PROGRESS
        _must_rejoin(ctx, group, member)
    ctx.out.reply(cmd.reply_to, HeartbeatResult(error))


def classic_group_leave_to_consumer_group(ctx: CCtx, group: ConsumerGroup, cmd: c.LeaveGroup) -> list[str]:
    """Removes the leaving classic members; returns their ids (the caller bumps the epoch)."""
    answers: list[LeaveMemberResult] = []
    left: list[str] = []
    for m in cmd.members:
        try:
            if m.group_instance_id is None:
                member = group.members.get(m.member_id)
                if member is None or member.classic is None:
                    raise ApiError(E.UNKNOWN_MEMBER_ID)
            else:
                member = group.static_member(m.group_instance_id)
                if member is None:
                    raise ApiError(E.UNKNOWN_MEMBER_ID)
                if m.member_id != c.UNKNOWN_MEMBER_ID and member.member_id != m.member_id:
                    raise ApiError(E.FENCED_INSTANCE_ID)
                if member.classic is None:
                    raise ApiError(E.UNKNOWN_MEMBER_ID)
            left.append(member.member_id)
            answers.append(LeaveMemberResult(member.member_id, m.group_instance_id, E.NONE))
        except ApiError as exc:
            answers.append(LeaveMemberResult(m.member_id, m.group_instance_id, exc.code))
    ctx.out.reply(cmd.reply_to, LeaveGroupResult(E.NONE, tuple(answers)))
    return left


def on_classic_timeout(ctx: CCtx, group: ConsumerGroup | None, expiry: cc.ConsumerClassicTimeout) -> None:
    from .consumer_heartbeat import fence_member, finish

    if group is None:
        return
    group.classic_join_timers.discard(expiry.member_id)
    member = group.members.get(expiry.member_id)
    if member is None:
        return
    fence_member(ctx, group, member, expiry.reason)
    finish(ctx, None, None)


def leave_classic_members(ctx: CCtx, group: ConsumerGroup, cmd: c.LeaveGroup) -> None:
    """classicGroupLeaveToConsumerGroup: remove the members, bump the epoch once."""
    from .consumer_heartbeat import finish

    left = classic_group_leave_to_consumer_group(ctx, group, cmd)
    if not left:
        return
    for member_id in left:
        ctx.records.extend(member_tombstones(group.group_id, member_id))
        for key in (cc.session_key, cc.rebalance_key, cc.join_key, cc.sync_key):
            ctx.out.cancel(key(group.group_id, member_id))
        group.classic_join_timers.discard(member_id)
    gone = set(left)
    names: set[str] = set()
    for m in group.members.values():
        if m.member_id not in gone:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names.update(group.resolved_regexes.get(m.subscribed_topic_regex, ()))
    ctx.records.append(ConsumerGroupMetadataRecord(group.group_id, group.group_epoch + 1,
                                                   metadata_hash(names, ctx.image())))
    finish(ctx, None, None)
