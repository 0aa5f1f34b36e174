"""ConsumerGroupHeartbeat: join, heartbeat, leave, fence (Kafka's GroupMetadataManager for
consumer groups: consumerGroupHeartbeat, consumerGroupLeave, consumerGroupFenceMember, and the
session and rebalance timeouts).

Handlers never change a group: they compute the records that describe the change (and the reply
that follows from it) from the group as it is, exactly as Kafka's handlers do; the shell appends
the records and replays them (consumer_records.replay), then releases the reply.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from ..events import AssignmentChanged  # defined with the group shard's events; re-exported here

from ....protocol.errors import ErrorCode

from . import consumer_commands as cc
from .assignors import MemberSubscription, PartitionAssignorError, assign
from ...config import GroupConfig
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    GroupConfigLookup,
    TopicImage,
    heartbeat_interval_ms,
    new_member_id,
    no_overrides,
    session_timeout_ms,
)
from ....protocol.records.consumer_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupRegularExpressionRecord,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    ConsumerRecord,
)
from .consumer_records import current_assignment_record, member_subscription_record, member_tombstones
from .downgrade import DowngradedToClassic, convert_to_classic_group, validate_online_downgrade
from ...runtime.outcome import Outcome, Reply, ScheduleTimer
from ....protocol.records.classic_records import Record
from .reconcile import FencedMemberEpoch, is_subset, maybe_reconcile
from .regex import InvalidRegularExpression, compile_regex
from ..group_types import ApiError

E = ErrorCode
TopicsImage = Callable[[], Mapping[str, TopicImage]]


@dataclass(slots=True)
class CCtx:
    config: GroupConfig
    now_ms: int
    out: Outcome
    topics: TopicsImage
    records: list[Record] = field(default_factory=list)  # consumer records, or classic ones on a downgrade
    then: object | None = None  # a follow-up for the classic machine (a downgrade)
    _image: Mapping[str, TopicImage] | None = None
    overrides: GroupConfigLookup = no_overrides  # groups' consumer.* config overrides (TypeContext.group_config)

    def image(self) -> Mapping[str, TopicImage]:
        if self._image is None:
            self._image = self.topics()
        return self._image


# -- validation -----------------------------------------------------------------------------------


def throw_if_request_invalid(ctx: CCtx, cmd: cc.ConsumerGroupHeartbeat) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    def invalid(message: str) -> ApiError:
        return ApiError(E.INVALID_REQUEST, message)

    if cmd.api_version >= 1 and cmd.member_id == "":
        raise invalid("MemberId can't be empty.")  # KIP-1082: v1 clients generate their own id
    if cmd.group_id == "":
        raise invalid("GroupId can't be empty.")
    if cmd.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if cmd.rack_id == "":
        raise invalid("RackId can't be empty.")
    if cmd.member_epoch > 0 or cmd.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if cmd.member_id == "":
            raise invalid("MemberId can't be empty.")
    elif cmd.member_epoch == 0:
        if cmd.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if cmd.owned_topic_partitions is None or len(cmd.owned_topic_partitions) != 0:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if cmd.subscribed_topic_names is None and cmd.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif cmd.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if cmd.member_id == "":
            raise invalid("MemberId can't be empty.")
        if cmd.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if cmd.subscribed_topic_regex is not None:
        try:
            compile_regex(cmd.subscribed_topic_regex)
        except InvalidRegularExpression as exc:
            raise ApiError(E.INVALID_REGULAR_EXPRESSION, str(exc)) from None
    if cmd.server_assignor is not None and cmd.server_assignor not in ctx.config.consumer_assignors:
        raise ApiError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {cmd.server_assignor} is not supported. "
                       f"Supported assignors: {', '.join(ctx.config.consumer_assignors)}.")


def throw_if_member_epoch_invalid(member: ConsumerGroupMember, received: int,
                                  owned: cc.OwnedTopicPartitions | None) -> None:
    if received > member.member_epoch:
        raise ApiError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({received}) "
                       f"than the one known by the group coordinator ({member.member_epoch}). "
                       "The member must abandon all its partitions and rejoin.")
    if received < member.member_epoch:
        # The answer with the bumped epoch may have been lost: accept the previous epoch if the
        # member owns no more than its current assignment.
        if received != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions):
            raise ApiError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                           f"({received}) than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")


# -- metadata -------------------------------------------------------------------------------------


def resolve_regex(regex: str, image: Mapping[str, TopicImage]) -> frozenset[str]:
    pattern = compile_regex(regex)
    return frozenset(name for name in image if not name.startswith("__") and pattern.fullmatch(name))


def refreshed_regex(regex: str, stored: frozenset[str] | None, image: Mapping[str, TopicImage],
                    allowed: Callable[[str], bool] | None) -> frozenset[str] | None:
    """The regex's new resolution when this member's heartbeat must resolve it again, else None.

    Without an authorizer: whenever what it matches changed. With one (`allowed`, the member's
    DESCRIBE): when a topic it resolved to is gone, or it matches a topic this member may describe
    that it did not resolve to. So members of one group whose principals may describe different
    topics do not take turns resolving it (a rebalance each): as with Kafka's batched refresh, the
    group keeps one resolution until the topics change, the widest any member's rights give."""
    if allowed is None:
        resolved = resolve_regex(regex, image)
        return resolved if resolved != stored else None
    matched = resolve_regex(regex, image)
    if stored is not None and stored <= matched and not any(allowed(n) for n in matched - stored):
        return None
    resolved = frozenset(n for n in matched if allowed(n))
    return resolved if resolved != stored else None


def subscription_metadata(names: set[str], image: Mapping[str, TopicImage]) -> dict[uuid.UUID, int]:
    return {image[n].topic_id: image[n].num_partitions for n in names if n in image}


def metadata_hash(names: set[str], image: Mapping[str, TopicImage]) -> int:
    """A stable 64-bit digest of the subscribed topics as they exist (id, name, partitions), like
    KIP-1101's MetadataHash: it changes when a subscribed topic appears, goes or grows."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(n for n in names if n in image):
        t = image[name]
        h.update(f"{t.topic_id}|{name}|{t.num_partitions};".encode())
    return int.from_bytes(h.digest(), "big", signed=True) if names & set(image) else 0


def member_topic_ids(member: ConsumerGroupMember, group: ConsumerGroup,
                     image: Mapping[str, TopicImage], regexes: Mapping[str, frozenset[str]]) -> frozenset[uuid.UUID]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= regexes.get(member.subscribed_topic_regex, group.resolved_regexes.get(member.subscribed_topic_regex,
                                                                                         frozenset()))
    return frozenset(image[n].topic_id for n in names if n in image)


# -- the target assignment (TargetAssignmentBuilder) ----------------------------------------------


def update_target_assignment(ctx: CCtx, group: ConsumerGroup, group_epoch: int,
                             old: ConsumerGroupMember | None, updated: ConsumerGroupMember | None,
                             regexes: Mapping[str, frozenset[str]], names: set[str], reason: str,
                             removed: str | None = None) -> Assignment:
    """Compute the whole group's target for `group_epoch` with `updated` in place of `old` (and
    `removed` gone), emit a record per member whose target changed and the new epoch; return
    `updated`'s target."""
    image = ctx.image()
    members = dict(group.members)
    if removed is not None:
        members.pop(removed, None)
    if updated is not None:
        members[updated.member_id] = updated
    assignor = group.preferred_server_assignor(old, updated) or ctx.config.consumer_assignors[0]
    subscriptions: dict[str, MemberSubscription] = {}
    # Members mostly share a handful of subscriptions: each is resolved to topic ids once.
    topic_ids: dict[tuple[tuple[str, ...], str | None], frozenset[uuid.UUID]] = {}
    for member_id, member in members.items():
        shape = (member.subscribed_topic_names, member.subscribed_topic_regex)
        ids = topic_ids.get(shape)
        if ids is None:
            ids = topic_ids[shape] = member_topic_ids(member, group, image, regexes)
        current = group.target_assignment.get(member_id)
        if current is None and member.instance_id is not None:
            # A static member that replaced its previous incarnation keeps that target.
            previous = group.static_members.get(member.instance_id)
            current = group.target_assignment.get(previous, {}) if previous else {}
        subscriptions[member_id] = MemberSubscription(ids, member.instance_id, member.rack_id, current or {})
    try:
        result = assign(assignor, subscriptions, subscription_metadata(names, image))
    except PartitionAssignorError as exc:
        raise ApiError(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                       f"{group_epoch}: {exc}") from None
    moved: list[str] = []
    for member_id in members:
        new = result.get(member_id, {})
        if new != dict(group.target_assignment.get(member_id, {})):
            ctx.records.append(ConsumerGroupTargetAssignmentMemberRecord(group.group_id, member_id, new))
            moved.append(member_id)
    ctx.records.append(ConsumerGroupTargetAssignmentMetadataRecord(group.group_id, group_epoch, ctx.now_ms))
    joined = (updated.member_id,) if updated is not None and updated.member_id not in group.members else ()
    ctx.out.events.append(AssignmentChanged(
        group.group_id, group_epoch, group_epoch, reason,
        updated.member_id if updated is not None else removed, assignor, tuple(sorted(moved)), len(members),
        group.group_epoch, joined, (removed,) if removed is not None else (),
        _session_timeout(ctx, group.group_id, reason)))
    return result.get(updated.member_id, {}) if updated is not None else {}


# -- ConsumerGroupHeartbeat -----------------------------------------------------------------------


def consumer_group_heartbeat(ctx: CCtx, groups: Mapping[str, ConsumerGroup], cmd: cc.ConsumerGroupHeartbeat,
                             get_or_create: Callable[[CCtx, str, bool], ConsumerGroup]) -> None:
    try:
        throw_if_request_invalid(ctx, cmd)
        if cmd.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            result = consumer_group_leave(ctx, groups, cmd)
        else:
            result = _heartbeat(ctx, cmd, get_or_create)
    except ApiError as exc:
        ctx.records.clear()
        ctx.out.events.clear()
        ctx.out.timers.clear()
        ctx.out.reply(cmd.reply_to, cc.ConsumerGroupHeartbeatResult(exc.code, exc.message))
        return
    except FencedMemberEpoch as exc:
        ctx.records.clear()
        ctx.out.reply(cmd.reply_to, cc.ConsumerGroupHeartbeatResult(E.FENCED_MEMBER_EPOCH, str(exc)))
        return
    finish(ctx, cmd.reply_to, result)


def finish(ctx: CCtx, reply_to: object, result: object) -> None:
    """Records first, then the reply once they are durable (or at once when there are none)."""
    if ctx.records:
        ctx.out.write(list(ctx.records), [Reply(reply_to, result)] if reply_to is not None else [], then=ctx.then)
        ctx.records.clear()
    else:
        ctx.out.reply(reply_to, result)


def steady_heartbeat(config: GroupConfig, topics: TopicsImage, groups: Mapping[str, ConsumerGroup],
                     cmd: cc.ConsumerGroupHeartbeat, overrides: GroupConfigLookup = no_overrides) -> Outcome | None:
    """The Outcome `consumer_group_heartbeat` gives a heartbeat that changes nothing, or None when
    it might change something (the full path then decides). Nothing changes when a known member,
    stable at its group's assignment epoch, sends only its id and current epoch, with the client
    it joined from, and neither its group's regular expressions nor its subscribed topics' metadata
    moved: no record, the session timeout re-armed, the epoch and heartbeat interval answered
    without an assignment. Those last two checks are the group's, not the member's: they are kept
    in `steady_memo` while neither the group (its revision) nor the topics image changed."""
    if (cmd.member_epoch <= 0 or not cmd.member_id or not cmd.group_id or cmd.instance_id is not None
            or cmd.rack_id is not None or cmd.rebalance_timeout_ms != -1 or cmd.subscribed_topic_names is not None
            or cmd.subscribed_topic_regex is not None or cmd.server_assignor is not None
            or cmd.owned_topic_partitions is not None):
        return None
    group = groups.get(cmd.group_id)
    if group is None:
        return None
    member = group.members.get(cmd.member_id)
    if (member is None or member.member_epoch != cmd.member_epoch or member.classic is not None
            or member.state is not MemberState.STABLE or member.member_epoch != group.assignment_epoch
            or group.group_epoch > group.assignment_epoch or member.client_id != cmd.client_id
            or member.client_host != cmd.client_host):
        return None
    image = topics()
    memo = group.steady_memo
    if memo is None or memo[0] is not image or memo[1] != group.revision:
        if not _metadata_current(group, member, image, cmd.topic_filter):
            return None
        memo = group.steady_memo = (image, group.revision, {})
    # The session timer and the answer of a member's steady heartbeats are the same until the
    # member changes (a new object): made once, kept with the memo (which a new revision drops).
    answers = memo[2]
    made = answers.get(member.member_id)
    session = session_timeout_ms(config, overrides, group.group_id)
    interval = heartbeat_interval_ms(config, overrides, group.group_id)
    if made is None or made[0] is not member or made[3] != (session, interval):  # the group's overrides may change
        made = answers[member.member_id] = (member, ScheduleTimer(
            cc.session_key(group.group_id, member.member_id), session,
            cc.ConsumerSessionExpired(group.group_id, member.member_id)), cc.ConsumerGroupHeartbeatResult(
            E.NONE, None, member.member_id, member.member_epoch, interval, None), (session, interval))
    out = Outcome()
    out.timers.append(made[1])
    if cmd.reply_to is not None:
        out.replies.append(Reply(cmd.reply_to, made[2]))
    return out


def _metadata_current(group: ConsumerGroup, member: ConsumerGroupMember, image: Mapping[str, TopicImage],
                      allowed: Callable[[str], bool] | None) -> bool:
    """What `_heartbeat` computes for a member whose subscription stays: every regex of the group
    resolves as recorded (for what this member may describe), none is left over, and the metadata
    hash of the subscribed topics is the group's."""
    wanted = group.regex_counts.keys()
    regexes = group.resolved_regexes
    if regexes.keys() != wanted or any(refreshed_regex(regex, regexes[regex], image, allowed) is not None
                                       for regex in wanted):
        return False
    names = _subscribed_names(group, member, member, regexes)
    return metadata_hash(names, image) == group.metadata_hash


def _heartbeat(ctx: CCtx, cmd: cc.ConsumerGroupHeartbeat,
               get_or_create: Callable[[CCtx, str, bool], ConsumerGroup]) -> cc.ConsumerGroupHeartbeatResult:
    create = cmd.member_epoch == 0
    group = get_or_create(ctx, cmd.group_id, create)
    member_id = cmd.member_id or new_member_id()
    if len(group.members) >= ctx.config.group_consumer_max_size and member_id not in group.members:
        raise ApiError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                       f"{ctx.config.group_consumer_max_size} members.")

    replaced: ConsumerGroupMember | None = None
    if cmd.instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            member = ConsumerGroupMember(member_id)
        else:
            throw_if_member_epoch_invalid(member, cmd.member_epoch, cmd.owned_topic_partitions)
    else:
        existing = group.static_member(cmd.instance_id)
        if create:
            if existing is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id)
            else:
                # Only a new-protocol member must have left (-2) first; a classic member's slot is
                # taken over at once (the upgrade of a static classic member).
                if existing.classic is None and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise ApiError(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                   f"{cmd.instance_id} cannot join the group because the instance id is owned "
                                   f"by {existing.member_id} member.")
                # The same instance is back: it takes over the previous member's assignment.
                member = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
                replaced = existing
                ctx.records.extend(member_tombstones(group.group_id, existing.member_id))
                ctx.records.append(member_subscription_record(group.group_id, member))
                ctx.records.append(ConsumerGroupTargetAssignmentMemberRecord(
                    group.group_id, member_id, dict(group.target(existing.member_id))))
                ctx.records.append(current_assignment_record(group.group_id, member))
        else:
            if existing is None:
                raise ApiError(E.UNKNOWN_MEMBER_ID, f"Instance id {cmd.instance_id} is unknown.")
            if existing.member_id != member_id:
                raise ApiError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                               f"{cmd.instance_id} was fenced by member {existing.member_id}.")
            throw_if_member_epoch_invalid(existing, cmd.member_epoch, cmd.owned_topic_partitions)
            member = existing

    # 1. The member's subscription.
    steady = (member.classic is None and cmd.instance_id in (None, member.instance_id) and cmd.rack_id in (None, member.rack_id)
              and cmd.rebalance_timeout_ms in (-1, member.rebalance_timeout_ms)
              and cmd.server_assignor in (None, member.server_assignor) and cmd.subscribed_topic_names is None
              and cmd.subscribed_topic_regex is None and (cmd.client_id, cmd.client_host) == (
                  member.client_id, member.client_host))
    updated = member if steady and member.member_id in group.members else member.replace(
        instance_id=cmd.instance_id if cmd.instance_id is not None else member.instance_id,
        rack_id=cmd.rack_id if cmd.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=cmd.rebalance_timeout_ms if cmd.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        server_assignor=cmd.server_assignor if cmd.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(tuple(sorted(set(cmd.subscribed_topic_names)))
                                if cmd.subscribed_topic_names is not None else member.subscribed_topic_names),
        subscribed_topic_regex=(cmd.subscribed_topic_regex or None) if cmd.subscribed_topic_regex is not None
        else member.subscribed_topic_regex,
        client_id=cmd.client_id, client_host=cmd.client_host, classic=None,
    )
    reason = None
    is_new = member.member_id not in group.members and replaced is None
    if not updated.metadata_equals(member if not is_new else None) or replaced is not None:
        if replaced is None or not updated.metadata_equals(member):
            ctx.records.append(member_subscription_record(group.group_id, updated))
        if (not updated.subscription_equals(member) or is_new) and not _waits_for_regex(group, member, updated, is_new):
            reason = "member joined" if is_new else "subscription changed"

    # Regular expressions: a new one is resolved after this heartbeat, as Kafka resolves it
    # asynchronously (on_resolve_regexes): this answer carries what is resolved already, the regex's
    # topics come with a later epoch. Those resolved are refreshed when their topics changed.
    image = ctx.image()
    regexes = dict(group.resolved_regexes)
    _, wanted = group.subscriptions([m.member_id for m in (member, replaced) if m is not None], updated)
    for regex in sorted(wanted):
        if regex not in regexes:
            ctx.out.schedule(cc.regex_key(group.group_id, regex), 0,
                             cc.ConsumerRegexResolve(group.group_id, regex, cmd.topic_filter))
            continue
        resolved = refreshed_regex(regex, regexes.get(regex), image, cmd.topic_filter)
        if resolved is not None:
            regexes[regex] = resolved
            ctx.records.append(ConsumerGroupRegularExpressionRecord(
                group.group_id, regex, tuple(sorted(resolved)), 0, ctx.now_ms))
    for regex in sorted(set(regexes) - wanted):
        del regexes[regex]
        ctx.records.append(ConsumerGroupRegularExpressionTombstone(group.group_id, regex))

    # 2. The group epoch: bumped when a subscription or the subscribed topics' metadata changed.
    names = _subscribed_names(group, member, updated, regexes, replaced)
    new_hash = metadata_hash(names, image)
    group_epoch = group.group_epoch
    if new_hash != group.metadata_hash and reason is None:
        reason = "metadata changed"
    if reason is not None or new_hash != group.metadata_hash:
        group_epoch += 1
        ctx.records.append(ConsumerGroupMetadataRecord(group.group_id, group_epoch, new_hash))

    # 3. The target assignment.
    if group_epoch > group.assignment_epoch:
        target = update_target_assignment(ctx, group, group_epoch, member, updated, regexes, names,
                                          reason or "group epoch ahead of assignment",
                                          removed=replaced.member_id if replaced is not None else None)
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        target = group.target(updated.member_id)
        if replaced is not None:
            target = group.target(replaced.member_id)

    # 4. Reconcile the member toward its target.
    owned = cmd.owned_topic_partitions
    reconciled = maybe_reconcile(updated, target_epoch, target, _partition_epoch(group, updated, replaced), owned)
    if is_new or (reconciled is not updated and not reconciled.assignment_equals(updated)):
        ctx.records.append(current_assignment_record(group.group_id, reconciled))
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            ctx.out.schedule(cc.rebalance_key(group.group_id, member_id), max(reconciled.rebalance_timeout_ms, 0),
                             cc.ConsumerRebalanceExpired(group.group_id, member_id, reconciled.member_epoch))
        else:
            ctx.out.cancel(cc.rebalance_key(group.group_id, member_id))
    ctx.out.schedule(cc.session_key(group.group_id, member_id),
                     session_timeout_ms(ctx.config, ctx.overrides, group.group_id),
                     cc.ConsumerSessionExpired(group.group_id, member_id))

    full = cmd.member_epoch == 0 or (cmd.rebalance_timeout_ms != -1 and (
        cmd.subscribed_topic_names is not None or cmd.subscribed_topic_regex is not None) and owned is not None)
    changed = dict(reconciled.assigned_partitions) != dict(member.assigned_partitions) or is_new
    return cc.ConsumerGroupHeartbeatResult(
        E.NONE, None, member_id, reconciled.member_epoch,
        heartbeat_interval_ms(ctx.config, ctx.overrides, group.group_id),
        wire_assignment(reconciled.assigned_partitions) if full or changed else None,
    )


def _waits_for_regex(group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                     is_new: bool) -> bool:
    """The subscription change is only a regex no heartbeat has resolved: Kafka bumps no epoch for it
    (its resolution will), so the member reconciles to the current assignment meanwhile."""
    names = () if is_new else member.subscribed_topic_names
    regex = None if is_new else member.subscribed_topic_regex
    return (updated.subscribed_topic_names == names and updated.subscribed_topic_regex != regex
            and updated.subscribed_topic_regex is not None
            and updated.subscribed_topic_regex not in group.resolved_regexes)


def on_resolve_regexes(ctx: CCtx, group: ConsumerGroup | None, cmd: cc.ConsumerRegexResolve) -> None:
    """A regex no heartbeat has resolved, resolved now with the topics the member that brought it may
    describe (Kafka's handleRegularExpressionsResult): its record, a new group epoch and the target
    assignment with its topics, which each member takes at its next heartbeat. Nothing when no member
    subscribes to it any more, or a heartbeat resolved it meanwhile."""
    if group is None or group.deleted or cmd.regex not in group.regex_counts or cmd.regex in group.resolved_regexes:
        return
    image = ctx.image()
    regexes = dict(group.resolved_regexes)
    regexes[cmd.regex] = refreshed_regex(cmd.regex, None, image, cmd.topic_filter) or frozenset()
    ctx.records.append(ConsumerGroupRegularExpressionRecord(
        group.group_id, cmd.regex, tuple(sorted(regexes[cmd.regex])), 0, ctx.now_ms))
    names = _subscribed_names(group, None, None, regexes)
    group_epoch = group.group_epoch + 1
    ctx.records.append(ConsumerGroupMetadataRecord(group.group_id, group_epoch, metadata_hash(names, image)))
    update_target_assignment(ctx, group, group_epoch, None, None, regexes, names, "regular expression resolved")
    finish(ctx, None, None)


def _subscribed_names(group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None,
                      regexes: Mapping[str, frozenset[str]], replaced: ConsumerGroupMember | None = None) -> set[str]:
    """The topic names the group subscribes to, by name or through its regexes as `regexes`
    resolves them, with `old` (and `replaced`) out and `new` in."""
    names, wanted = group.subscriptions([m.member_id for m in (old, replaced) if m is not None], new)
    for regex in wanted:
        names.update(regexes.get(regex, ()))
    return names


def _partition_epoch(group: ConsumerGroup, member: ConsumerGroupMember,
                     replaced: ConsumerGroupMember | None) -> Callable[[uuid.UUID, int], int]:
    """Partition epochs as they will be once the records are replayed: a replaced static
    member's partitions pass to its successor, so they are not held by anyone else."""
    if replaced is None:
        return group.current_partition_epoch
    released = {(t, p) for a in (replaced.assigned_partitions, replaced.partitions_pending_revocation)
                for t, ps in a.items() for p in ps}

    def epoch(topic_id: uuid.UUID, partition: int) -> int:
        if (topic_id, partition) in released:
            return -1
        return group.current_partition_epoch(topic_id, partition)
    return epoch


def wire_assignment(assignment: Assignment) -> cc.OwnedTopicPartitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


# -- leaving and fencing --------------------------------------------------------------------------


def consumer_group_leave(ctx: CCtx, groups: Mapping[str, ConsumerGroup],
                         cmd: cc.ConsumerGroupHeartbeat) -> cc.ConsumerGroupHeartbeatResult:
    group = groups.get(cmd.group_id)
    if group is None:
        raise ApiError(E.GROUP_ID_NOT_FOUND, f"Consumer group {cmd.group_id} not found.")
    result = cc.ConsumerGroupHeartbeatResult(E.NONE, None, cmd.member_id, cmd.member_epoch)
    if cmd.instance_id is None:
        member = group.members.get(cmd.member_id)
        if member is None:
            raise ApiError(E.UNKNOWN_MEMBER_ID, f"Member {cmd.member_id} is not a member of group {group.group_id}.")
        fence_member(ctx, group, member, "member left")
        return result
    member = group.static_member(cmd.instance_id)
    if member is None:
        raise ApiError(E.UNKNOWN_MEMBER_ID, f"Instance id {cmd.instance_id} is unknown.")
    if member.member_id != cmd.member_id:
        raise ApiError(E.FENCED_INSTANCE_ID, f"Static member {cmd.member_id} with instance id {cmd.instance_id} "
                       f"was fenced by member {member.member_id}.")
    if cmd.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # A static member leaving for a restart keeps its assignment for the session timeout.
        leaving = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
        ctx.records.append(current_assignment_record(group.group_id, leaving))
        return cc.ConsumerGroupHeartbeatResult(E.NONE, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    fence_member(ctx, group, member, "member left")
    return result


def fence_member(ctx: CCtx, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> None:
    """Kafka's consumerGroupFenceMember: remove the member and bump the group epoch, computing the
    survivors' new targets at once (Kafka leaves that to their next heartbeat; doing it here lets
    the assignment event carry the reason). If only classic members remain, the group goes back
    to the classic protocol instead (online downgrade)."""
    for key in (cc.session_key, cc.rebalance_key, cc.join_key, cc.sync_key):
        ctx.out.cancel(key(group.group_id, member.member_id))
    group.classic_join_timers.discard(member.member_id)
    if validate_online_downgrade(ctx, group, member.member_id):
        convert_to_classic_group(ctx, group, member.member_id)
        ctx.then = DowngradedToClassic(group.group_id, reason)
        return
    ctx.records.extend(member_tombstones(group.group_id, member.member_id))
    image = ctx.image()
    regexes = dict(group.resolved_regexes)
    if member.subscribed_topic_regex and not any(
            m.subscribed_topic_regex == member.subscribed_topic_regex
            for m in group.members.values() if m.member_id != member.member_id):
        regexes.pop(member.subscribed_topic_regex, None)
        ctx.records.append(ConsumerGroupRegularExpressionTombstone(group.group_id, member.subscribed_topic_regex))
    names = _subscribed_names(group, member, None, regexes)
    group_epoch = group.group_epoch + 1
    ctx.records.append(ConsumerGroupMetadataRecord(group.group_id, group_epoch, metadata_hash(names, image)))
    if len(group.members) > 1:
        # Compute the survivors' targets now, so they move on at their next heartbeat.
        update_target_assignment(ctx, group, group_epoch, member, None, regexes, names, reason,
                                 removed=member.member_id)
    else:
        # The last member gone, the group is empty: its assignment epoch follows the group epoch, with
        # the timestamp of a new group's, so no assignment interval delays the next member (Kafka 4.4's
        # fenceMembers); the epoch moved, and the group's history says so
        ctx.records.append(ConsumerGroupTargetAssignmentMetadataRecord(group.group_id, group_epoch, 0))
        ctx.out.events.append(AssignmentChanged(
            group.group_id, group_epoch, group_epoch, reason, member.member_id, "", (), 0,
            group.group_epoch, (), (member.member_id,), _session_timeout(ctx, group.group_id, reason)))


def _session_timeout(ctx: CCtx, group_id: str, reason: str) -> int | None:
    return session_timeout_ms(ctx.config, ctx.overrides, group_id) if reason == "session expired" else None


def on_session_expired(ctx: CCtx, group: ConsumerGroup | None, expiry: cc.ConsumerSessionExpired) -> None:
    member = group.members.get(expiry.member_id) if group is not None else None
    if group is None or member is None:
        return
    fence_member(ctx, group, member, "session expired")
    finish(ctx, None, None)


def on_rebalance_expired(ctx: CCtx, group: ConsumerGroup | None, expiry: cc.ConsumerRebalanceExpired) -> None:
    member = group.members.get(expiry.member_id) if group is not None else None
    if group is None or member is None or member.member_epoch != expiry.member_epoch:
        return  # the member moved on in time
    fence_member(ctx, group, member, "revocation timed out")
    finish(ctx, None, None)
