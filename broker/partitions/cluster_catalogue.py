"""The topic catalogue of several nodes in one process (issue 41, `kbroker serve --nodes N`).

The storage stays the one local log: a partition's replicas are a view over it (nothing is copied),
so every replica is always caught up, and the in-sync replicas (ISR) are exactly the replicas whose
node is up. What the catalogue keeps per partition, in its topic's record: the replicas (placed by
placement.py as Kafka places them, or as an explicit assignment says), the leader where it is not
the first replica (-1: none, every replica's node down), and the leader epoch.

A leader changes only by an election here (`elect`, `stop_node`, `start_node`, `shuffle`), which
bumps the partition's leader epoch in its record and epoch history, as Kafka's controller does; an
ISR change alone bumps nothing (KRaft keeps the leader epoch for an ISR change too). Whoever must
act on a new leader (the coordinators move their partitions, parked fetches answer) subscribes to
`leader_listeners`; the catalogue itself knows no coordinator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import structlog

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.topic_names import INTERNAL_TOPICS
from .catalogue import NO_LEADER, Leadership, TopicCatalogue, TopicInfo
from .placement import check_assignment, preferred_leader_moves

if TYPE_CHECKING:
    from ..storage.api import LogEngine
    from ..storage.producer_state import ProducerIdAllocator

log = structlog.get_logger("kbroker.catalogue")

INTERNAL_REPLICATION_FACTOR = 3  # offsets.topic.replication.factor, transaction.state.log.replication.factor

# (topic, partition, old leader, new leader, new epoch)
LeaderListener = Callable[[str, int, int, int, int], None]


def local_cluster(catalogue: TopicCatalogue) -> ClusterCatalogue | None:
    """The catalogue as several nodes of this process (`--nodes N`), else None (one node, or the nodes
    over PostgreSQL, whose elections and placements are the engine's): for the APIs only the former
    answers as a cluster (ElectLeaders, the reassignments)."""
    return catalogue if isinstance(catalogue, ClusterCatalogue) else None


class ClusterCatalogue(TopicCatalogue):
    clustered = True

    def __init__(self, engine: LogEngine, node_ids: list[int], producer_ids: ProducerIdAllocator | None, *,
                 default_replication_factor: int = 1) -> None:
        super().__init__(engine, node_ids[0], producer_ids)
        self._nodes = list(node_ids)
        self._live = list(node_ids)
        self._default_rf = default_replication_factor
        self.leader_listeners: list[LeaderListener] = []
        self._adopt_topics()
        self._complete_reassignments()  # one left under way by a stopped node: every node is up now

    # --- nodes --------------------------------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        return self._nodes

    @property
    def live_nodes(self) -> list[int]:
        return self._live

    @property
    def controller(self) -> int:
        """The node answering as the controller: the first node that is up (-1 when none is)."""
        return self._live[0] if self._live else NO_LEADER

    def default_replication_factor(self, topic: str) -> int:
        if topic in INTERNAL_TOPICS:  # Kafka's default 3, as far as the nodes that are up allow
            return max(1, min(INTERNAL_REPLICATION_FACTOR, len(self._live)))
        return self._default_rf

    def place(self, topic: str, num_partitions: int, replication_factor: int,
              assignments: dict[int, list[int]] | None = None, *, first_partition: int = 0) -> dict[int, list[int]]:
        if not self._live:
            raise KafkaError("no broker is up", ErrorCode.INVALID_REPLICATION_FACTOR)
        return super().place(topic, num_partitions, replication_factor, assignments, first_partition=first_partition)

    # --- leadership ---------------------------------------------------------------------------------

    def replicas(self, info: TopicInfo, partition: int) -> list[int]:
        # a topic made on one node (no replicas recorded) lives on the first node
        return info.replicas.get(partition) or self._nodes[:1]

    def leader(self, info: TopicInfo, partition: int) -> int:
        leaders = info.leaders
        if leaders and partition in leaders:
            return leaders[partition]
        return self.replicas(info, partition)[0]

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        info = self._engine.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        replicas = self.replicas(info, partition)
        live = self._live
        epoch = info.leader_epochs.get(partition, 0)
        offline = [r for r in replicas if r not in live]
        if info.damaged is not None:
            return Leadership(NO_LEADER, epoch, replicas, [], replicas)
        return Leadership(self.leader(info, partition), epoch, replicas, [r for r in replicas if r in live], offline)

    def leads(self, info: TopicInfo, partition: int, node: int | None) -> bool:
        if info.damaged is not None:
            return False
        leader = self.leader(info, partition)
        return leader != NO_LEADER if node is None else leader == node

    def isr_size(self, info: TopicInfo, partition: int) -> int:
        live = self._live
        return sum(1 for r in self.replicas(info, partition) if r in live)

    def elect(self, topic: str, partition: int, leader: int | None = None) -> int:
        """A new leadership term for the partition, led by `leader` (None: the same leader again);
        returns the new epoch. The leader must be a replica whose node is up, or NO_LEADER."""
        info = self._engine.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            raise KafkaError(f"unknown partition {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if info.damaged is not None:
            raise KafkaError(f"topic {topic!r} is fenced: {info.damaged}", ErrorCode.KAFKA_STORAGE_ERROR)
        old = self.leader(info, partition)
        new = old if leader is None else leader
        replicas = self.replicas(info, partition)
        if new != NO_LEADER and (new not in replicas or new not in self._live):
            raise KafkaError(f"node {new} is not an in-sync replica of {topic}-{partition} (replicas {replicas}, "
                             f"up {self._live})", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        epoch = info.leader_epochs.get(partition, 0) + 1
        store = self._engine.store(topic, partition)
        if store is not None:
            store.assign_leader_epoch(epoch)  # the history first: a crash then leaves the old epoch current
        info.leader_epochs[partition] = epoch
        if new == replicas[0]:
            info.leaders.pop(partition, None)
        else:
            info.leaders[partition] = new
        self._engine.write_topic_record(info)
        log.info("leader_elected", topic=topic, partition=partition, leader=new, previous_leader=old,
                 leader_epoch=epoch, isr=[r for r in replicas if r in self._live])
        for listener in list(self.leader_listeners):
            listener(topic, partition, old, new, epoch)
        return epoch

    def partitions(self) -> Iterator[tuple[TopicInfo, int]]:
        for info in list(self.topics().values()):
            if info.damaged is None:
                for partition in range(info.num_partitions):
                    yield info, partition

    # --- nodes going and coming ---------------------------------------------------------------------

    def add_node(self, node: int) -> None:
        """A node joins (up): new placements may use it; no partition moves to it (as in Kafka, a new
        broker holds nothing until a topic is created or reassigned)."""
        if node in self._nodes:
            raise KafkaError(f"node {node} exists already (nodes {self._nodes})", ErrorCode.INVALID_REQUEST)
        self._nodes = [*self._nodes, node]
        self._live = [n for n in self._nodes if n in self._live or n == node]

    def stop_node(self, node: int) -> list[tuple[str, int, int]]:
        """The node is down: out of every ISR, and each partition it led elects the first in-sync
        replica left (none: no leader until one comes back). Returns (topic, partition, new leader)."""
        if node not in self._nodes:
            raise KafkaError(f"no node {node} (nodes {self._nodes})", ErrorCode.INVALID_REQUEST)
        if node not in self._live:
            return []
        self._live = [n for n in self._live if n != node]
        moved = []
        for info, partition in self.partitions():
            if self.leader(info, partition) == node:
                left = [r for r in self.replicas(info, partition) if r in self._live]
                new = left[0] if left else NO_LEADER
                self.elect(info.name, partition, new)
                moved.append((info.name, partition, new))
        return moved

    def start_node(self, node: int) -> list[tuple[str, int, int]]:
        """The node is up again: back in the ISR of its partitions, and leader of those that had none.
        Leaders elsewhere stay where they are (`elect_preferred` moves them back)."""
        if node not in self._nodes:
            raise KafkaError(f"no node {node} (nodes {self._nodes})", ErrorCode.INVALID_REQUEST)
        if node in self._live:
            return []
        self._live = [n for n in self._nodes if n in self._live or n == node]
        moved = []
        for info, partition in self.partitions():
            if self.leader(info, partition) == NO_LEADER and node in self.replicas(info, partition):
                self.elect(info.name, partition, node)
                moved.append((info.name, partition, node))
        self._complete_reassignments()
        return moved

    def shuffle(self, rng: random.Random | None = None) -> list[tuple[str, int, int]]:
        """Every partition with another in-sync replica elects one of them at random."""
        pick = rng or random.Random()
        moved = []
        for info, partition in self.partitions():
            old = self.leader(info, partition)
            others = [r for r in self.replicas(info, partition) if r in self._live and r != old]
            if others:
                new = pick.choice(others)
                self.elect(info.name, partition, new)
                moved.append((info.name, partition, new))
        return moved

    def elect_preferred(self) -> list[tuple[str, int, int]]:
        """Kafka's preferred leader election: each partition back to its first replica, if up."""
        moved = []
        for topic, partition in self.imbalanced():
            info = self._engine.topic(topic)
            if info is not None:
                preferred = self.replicas(info, partition)[0]
                self.elect(topic, partition, preferred)
                moved.append((topic, partition, preferred))
        return moved

    def run_election(self, topic: str, partition: int, unclean: bool) -> tuple[ErrorCode, str | None]:
        """One partition of ElectLeaders (43), as Kafka's controller runs it (ReplicationControlManager
        .electLeader): PREFERRED elects the first replica if it is in sync (already leading:
        ELECTION_NOT_NEEDED; not in sync: PREFERRED_LEADER_NOT_AVAILABLE); UNCLEAN elects any replica
        that is up, only for a partition without a leader (ELECTION_NOT_NEEDED where it has one,
        ELIGIBLE_LEADERS_NOT_AVAILABLE where no replica is up). Returns (error, message) as Kafka's
        ApiError carries them."""
        info = self._engine.topic(topic)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
        if not 0 <= partition < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
        replicas = self.replicas(info, partition)
        leader = self.leader(info, partition) if info.damaged is None else NO_LEADER
        if leader != NO_LEADER and (unclean or leader == replicas[0]):
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if unclean:
            candidates = [r for r in replicas if r in self._live]
        else:
            candidates = [replicas[0]] if replicas[0] in self._live else []
        if not candidates:
            if unclean:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        try:
            self.elect(topic, partition, candidates[0])
        except KafkaError as e:
            return e.code, str(e)
        return ErrorCode.NONE, None

    def imbalanced(self) -> list[tuple[str, int]]:
        """The partitions whose preferred (first) replica is in sync but does not lead: what Kafka's
        controller balances when auto.leader.rebalance.enable is on."""
        return [key for key, _ in preferred_leader_moves(
            (((info.name, partition), self.leader(info, partition), self.replicas(info, partition))
             for info, partition in self.partitions()), self._live)]

    # --- reassignments (AlterPartitionReassignments, ListPartitionReassignments) ---------------------

    def reassign(self, topic: str, partition: int, target: list[int] | None, *, allow_rf_change: bool = True) -> None:
        """One partition of AlterPartitionReassignments (45), as Kafka's controller applies it
        (ReplicationControlManager.alterPartitionReassignment; raises KafkaError with its messages).
        The replicas become target + those it removes, the ones it adds noted; it completes once every
        added replica is in sync, which here is at once for nodes that are up (replicas are a view
        over the one log: nothing to copy) and when a stopped one starts again. `target` None cancels
        one under way (the added replicas go again)."""
        info = self._engine.topic(topic)
        if info is None or info.damaged is not None:
            raise KafkaError(f"Unable to find a topic named {topic}.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not 0 <= partition < info.num_partitions:
            raise KafkaError(f"Unable to find partition {topic}:{partition}.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.replicas(info, partition)
        adding, removing = info.adding.get(partition, []), info.removing.get(partition, [])
        if target is None:
            if not adding and not removing:
                # no message, as Kafka's ApiError.fromThrowable leaves out the error's own
                raise KafkaError("", ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            original = [r for r in current if r not in adding]
            if not any(r in self._live for r in original) and \
                    info.overrides.get("unclean.leader.election.enable") != "true":
                raise KafkaError(f"Unable to revert partition assignment for {topic}:{partition} because it would "
                                 f"require an unclean leader election.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            self._change_replicas(info, partition, original, [], [])
            return
        if not allow_rf_change:
            size = len((set(current) | set(adding)) - set(removing))  # the target under way, if any
            if size != len(target):
                raise KafkaError(f"The replication factor is changed from {size} to {len(target)}",
                                 ErrorCode.INVALID_REPLICATION_FACTOR)
        check_assignment(partition, target, self._nodes, None)  # registered nodes, up or not (as Kafka's)
        removing = [r for r in sorted(set(current) - set(target))]
        adding = [r for r in sorted(set(target) - set(current))]
        self._change_replicas(info, partition, [*target, *removing], adding, removing)

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """The reassignments under way: (topic, partition) -> (replicas, adding, removing)."""
        return {(info.name, p): (self.replicas(info, p), info.adding.get(p, []), info.removing.get(p, []))
                for info in list(self.topics().values()) if info.damaged is None
                for p in sorted(set(info.adding) | set(info.removing))}

    def _change_replicas(self, info: TopicInfo, partition: int, replicas: list[int], adding: list[int],
                         removing: list[int]) -> None:
        """A partition's new replica set (with the reassignment noted, or completed when it can), then
        its leader as Kafka's PartitionChangeBuilder keeps or elects it: the current one while it stays
        in sync, else the first in-sync replica; an epoch bump where a replica went."""
        old_replicas, old_leader = self.replicas(info, partition), self.leader(info, partition)
        completed = self._completed(replicas, adding, removing)
        if completed is not None:
            replicas, adding, removing = completed, [], []
        info.replicas[partition] = replicas
        for field, value in ((info.adding, adding), (info.removing, removing)):
            if value:
                field[partition] = value
            else:
                field.pop(partition, None)
        in_sync = [r for r in replicas if r in self._live]  # the removed stay in sync until it completes
        leader = old_leader if old_leader in in_sync else (in_sync[0] if in_sync else NO_LEADER)
        if old_leader == replicas[0]:
            info.leaders.pop(partition, None)
        else:
            info.leaders[partition] = old_leader  # the leader until the election below
        log.info("replicas_changed", topic=info.name, partition=partition, replicas=replicas, adding=adding,
                 removing=removing, previous_replicas=old_replicas)
        if leader != old_leader or not set(old_replicas) <= set(replicas):
            self.elect(info.name, partition, leader)  # writes the record
        else:
            self._engine.write_topic_record(info)

    def _completed(self, replicas: list[int], adding: list[int], removing: list[int]) -> list[int] | None:
        """The replicas a reassignment under way ends with, if it can complete now (Kafka's
        PartitionReassignmentReplicas.maybeCompleteReassignment): every added replica in sync, one kept
        replica in sync at least, and when it shrinks the factor every kept one in sync. None: not yet."""
        if not adding and not removing:
            return None
        kept = [r for r in replicas if r not in removing]
        isr = [r for r in kept if r in self._live]
        if isr and all(r in isr for r in adding) and (len(adding) >= len(removing) or len(isr) == len(kept)):
            return kept
        return None

    def _complete_reassignments(self) -> None:
        """After a node starts: each reassignment whose added replicas are now in sync completes."""
        for (topic, partition), (replicas, adding, removing) in self.reassignments().items():
            info = self._engine.topic(topic)
            if info is not None and self._completed(replicas, adding, removing) is not None:
                self._change_replicas(info, partition, replicas, adding, removing)

    # --- start-up -----------------------------------------------------------------------------------

    def _adopt_topics(self) -> None:
        """At start every node is up: a partition left leaderless, or led by a node this run does not
        have, elects its first replica that is up (an epoch bump, as any new leader)."""
        for info, partition in self.partitions():
            leader = self.leader(info, partition)
            if leader == NO_LEADER or leader not in self._nodes:
                left = [r for r in self.replicas(info, partition) if r in self._live]
                if left:
                    self.elect(info.name, partition, left[0])
