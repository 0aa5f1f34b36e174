"""KIP-951's leader hints, with several nodes (issue 41): a Produce (v10+) or Fetch (v16+) partition
answered NOT_LEADER_OR_FOLLOWER (Fetch: or FENCED_LEADER_EPOCH) carries the partition's current
leader and epoch, and the answer the endpoints of the leaders it names on the request's listener,
so the client goes to the new leader without a Metadata round trip (KafkaApis.getCurrentLeader).
One node never leads elsewhere, so it never calls this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ..services import BrokerServices

HINTED_PRODUCE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
HINTED_FETCH = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def hint(broker: BrokerServices, listener: str, topic: str, partition: int, current_leader: Any,
         endpoints: dict[int, tuple[str, int]]) -> None:
    """Fill `current_leader` (a LeaderIdAndEpoch) and note the leader's endpoint in `endpoints`."""
    led = broker.catalogue.leadership(topic, partition)
    if led is None:
        return
    current_leader.leader_id = led.leader
    current_leader.leader_epoch = led.epoch
    if led.leader >= 0 and led.leader not in endpoints:
        found = broker.node_endpoint(led.leader, listener)
        if found is not None:
            endpoints[led.leader] = found
