"""Online downgrade (KIP-848): a consumer group whose last new-protocol member leaves becomes a
classic group again. Split from migration.py so that the consumer group's own handlers
(consumer_heartbeat.fence_member) can downgrade without importing the upgrade path, which imports
them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....protocol import consumer_protocol
from .. import commands as c
from . import consumer_commands as cc
from .consumer_group import ConsumerGroup, ConsumerGroupMember, TopicImage
from .consumer_records import group_tombstones, member_tombstones
from ..classic.group import CONSUMER_PROTOCOL_TYPE
from ....protocol.records.classic_records import GroupMetadataMember, GroupMetadataRecord

if TYPE_CHECKING:
    from .consumer_heartbeat import CCtx

def encode_assignment(assignment, image: Mapping[str, TopicImage], version: int) -> bytes:
    """A member's assigned partitions (by topic id) as ConsumerProtocolAssignment bytes, in the
    version of the member's own subscription (Kafka's prepareAssignment)."""
    by_id = {t.topic_id: t.name for t in image.values()}
    return consumer_protocol.encode_assignment(
        ((by_id[t], sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
         if t in by_id and ps), version)



# -- downgrade ------------------------------------------------------------------------------------


def validate_online_downgrade(ctx: CCtx, group: ConsumerGroup, leaving: str) -> bool:
    policy = ctx.config.group_consumer_migration_policy.lower()
    return (group.all_use_classic_protocol_except(leaving) and len(group.members) > 1
            and policy in ("downgrade", "bidirectional") and len(group.members) - 1 <= ctx.config.group_max_size)


def validate_online_downgrade_with_replaced_member(ctx: CCtx, group: ConsumerGroup, replaced: str) -> bool:
    policy = ctx.config.group_consumer_migration_policy.lower()
    return (group.all_use_classic_protocol_except(replaced) and policy in ("downgrade", "bidirectional")
            and len(group.members) <= ctx.config.group_max_size)


def convert_to_classic_group(ctx: CCtx, group: ConsumerGroup, leaving: str,
                             joining: ConsumerGroupMember | None = None) -> None:
    """Records: the consumer group's tombstones, then the classic GroupMetadata of the members
    that stay (generation = group epoch, the members' current assignments), `joining` in place of
    `leaving` when a classic static member replaced the last new-protocol one; once they replay,
    the classic group rebalances unless a member was replaced (classic.on_write_done,
    DowngradedToClassic)."""
    image = ctx.image()
    ctx.records.extend(group_tombstones(group))
    if joining is not None:
        # the joining member's records were written earlier in this same batch
        ctx.records.extend(member_tombstones(group.group_id, joining.member_id))
    members = [m for m in group.members.values() if m.member_id != leaving and m.classic is not None]
    if joining is not None:
        members.append(joining)
    protocols = [n for n, _ in members[0].classic.supported_protocols]  # type: ignore[union-attr]
    common = [n for n in protocols if all(n in {p for p, _ in m.classic.supported_protocols}  # type: ignore[union-attr]
                                          for m in members)]
    protocol = (common or protocols)[0]
    ctx.records.append(GroupMetadataRecord(
        group=group.group_id, protocol_type=CONSUMER_PROTOCOL_TYPE, generation=group.group_epoch,
        protocol=protocol, leader=members[0].member_id, current_state_timestamp=ctx.now_ms,
        members=tuple(
            GroupMetadataMember(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,  # type: ignore[union-attr]
                dict(m.classic.supported_protocols).get(protocol, b""),  # type: ignore[union-attr]
                encode_assignment(m.assigned_partitions, image, int.from_bytes(
                    dict(m.classic.supported_protocols).get(protocol, b"\x00\x00")[:2], "big", signed=True)),  # type: ignore[union-attr]
            )
            for m in members
        ),
    ))
    for m in group.members.values():
        for key in (cc.session_key, cc.rebalance_key, cc.join_key, cc.sync_key):
            ctx.out.cancel(key(group.group_id, m.member_id))


@dataclass(frozen=True, slots=True)
class JoinAfterConsumerGroupDeleted:
    """A classic JoinGroup to an empty consumer group: once the group's tombstones are durable,
    the classic machine handles the join as for a new group (Kafka deletes the empty consumer
    group first); the offsets stay with the group id."""

    group_id: str
    join: c.JoinGroup


@dataclass(frozen=True, slots=True)
class DowngradedToClassic:
    """Follow-up for the classic machine once a downgrade's records are durable: re-arm the
    members' heartbeats and start a rebalance, as Kafka's convertToClassicGroup does."""

    group_id: str
    reason: str
    rebalance: bool = True
