"""The share persister (Kafka's DefaultStatePersister and PersisterStateManager): how a share-partition
led here reaches its state when another node's share coordinator serves it (over PostgreSQL, another
node leads the key's `__share_group_state` partition). The share-partitions whose state this node
serves keep their in-process path (share_state.py); the others read and write it through the state
RPCs (ReadShareGroupState 84, WriteShareGroupState 85) to that partition's leader, found in the
catalogue, at its advertised address on the inter-node listener (`listener`), over one pooled
connection per node (node_client.py).

As Kafka's persister, a request answered NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
COORDINATOR_NOT_AVAILABLE, or lost with its connection, is sent again after a backoff (50 ms doubling
to 1 s) to the leader the catalogue then shows (in-process if that is now this node), until
RETRY_FOR_S has passed: then the caller gets COORDINATOR_NOT_AVAILABLE (a fetch retries later, an
acknowledgement is rolled back). A write carries the data partition's leader epoch, so a deposed
leader's late write is refused there (FENCED_LEADER_EPOCH: the acknowledgement is rolled back and
answered NOT_LEADER_OR_FOLLOWER, state_shard.persister_error).

The inter-node listener: kbroker has no settings for credentials between nodes, so the persister
uses the first PLAINTEXT listener (every node of a cluster is configured alike); a node with none
cannot reach remote states (COORDINATOR_NOT_AVAILABLE, logged once). With an authorizer, the
principal of that listener (User:ANONYMOUS) needs CLUSTER_ACTION on the cluster, as Kafka's brokers'
own principal does: put the PLAINTEXT listener on an interface only the nodes reach.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog

from ...coordinator.share.persisted import PersistedState, Run
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import list_offsets_request as lo
from ...protocol.messages import read_share_group_state_request as rd
from ...protocol.messages import read_share_group_state_summary_request as summ
from ...protocol.messages import write_share_group_state_request as wr
from .node_client import NodeClient
from .share_state import TOPIC, partition_for
from .share_state_rpc import ShareStateRpcs, StateAnswer

if TYPE_CHECKING:
    from ..services import BrokerServices

log = structlog.get_logger("kbroker.share_persister")
E = ErrorCode
RETRIABLE = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)
RETRY_FOR_S = 15.0
BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
READ, WRITE, SUMMARY = 84, 85, 87


class SharePersister:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        self.listener = next((e.name for e in broker.config.listener_set().bind if e.security_protocol == "PLAINTEXT"),
                             None)
        self.client = NodeClient(f"kbroker-{broker.node_id}-share-persister")
        self.remote_reads = self.remote_writes = self.retries = 0
        self._told_no_listener = False
        self._writing: dict[tuple[str, uuid.UUID, int], asyncio.Future[None]] = {}  # each key's last write

    async def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState | None:
        """The share-partition's state (None: it has none), read where it is served; raises KafkaError."""
        self.remote_reads += 1
        body = rd.ReadShareGroupStateRequest(group, [rd.ReadStateData(topic_id, [rd.PartitionData(partition, leader_epoch)])])
        answer = await self._call(group, topic_id, partition, READ, 0, body,
                                  lambda rpcs: rpcs.read(group, topic_id, partition, leader_epoch))
        if answer.start_offset < 0:
            return None
        return PersistedState(0, answer.start_offset, list(answer.batches), 0, answer.state_epoch, answer.leader_epoch)

    async def summary(self, group: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int] | None:
        """(start offset, offsets past it whose delivery is complete) of the share-partition's state as
        the share coordinator serving it answers ReadShareGroupStateSummary (None: no state); raises
        KafkaError. What DescribeShareGroupOffsets shows of a state another node serves."""
        body = summ.ReadShareGroupStateSummaryRequest(group, [summ.ReadStateSummaryData(
            topic_id, [summ.PartitionData(partition, -1)])])
        answer = await self._call(group, topic_id, partition, SUMMARY, 1, body,
                                  lambda rpcs: rpcs.read(group, topic_id, partition, -1))
        return None if answer.start_offset < 0 else (answer.start_offset, answer.delivery_complete_count)

    async def started_elsewhere(self, group: str, keys: Iterable[tuple[uuid.UUID, int]]
                                ) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
        """`summary` of each (topic id, partition) of the group whose state another node serves and
        has one (those that cannot be read now are left out, logged)."""
        serving = self.broker.share_state.serving
        keys = list(keys)
        asked = [(t, p) for t, p in keys if serving(group, t, p) is E.NOT_COORDINATOR]
        answers = await asyncio.gather(*(self.summary(group, t, p) for t, p in asked), return_exceptions=True)
        out = {}
        for key, answer in zip(asked, answers):
            if isinstance(answer, BaseException):
                log.warning("share_state_summary_failed", group_id=group, topic_id=str(key[0]), partition=key[1],
                            error=repr(answer))
            elif answer is not None:
                out[key] = answer
        return out

    async def high_watermark(self, topic: str, partition: int) -> int:
        """The high watermark of a data partition another node leads, as its leader answers ListOffsets
        (LATEST), as Kafka 4.4's group coordinator asks it for a share group's lag (KIP-1226); -1 when it
        cannot be had now."""
        led = self.broker.catalogue.leadership(topic, partition)
        endpoint = None if led is None or self.listener is None else self.broker.node_endpoint(led.leader,
                                                                                                 self.listener)
        if led is None or endpoint is None or led.leader == self.broker.node_id:
            return -1
        body = lo.ListOffsetsRequest(-1, 0, [lo.ListOffsetsTopic(topic, [lo.ListOffsetsPartition(partition, -1, -1)])])
        try:
            answer = (await self.client.call(led.leader, *endpoint, 2, 9, body)).topics[0].partitions[0]
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("share_persister_connection_lost", node=led.leader, error=repr(exc))
            return -1
        return answer.offset if answer.error_code == 0 else -1

    def writing(self, group: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether a write of the key is still on its way (the next one must follow it, through here)."""
        return (group, topic_id, partition) in self._writing

    def write(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int, start: int,
              batches: list[Run]) -> asyncio.Future[None]:
        """The share-partition's whole state, written where it is served: done once durable there, else
        failed with KafkaError (its code as that coordinator answered, or COORDINATOR_NOT_AVAILABLE).
        The writes of one key are sent one after the other in call order (a retried older state never
        lands after a newer one)."""
        key = (group, topic_id, partition)
        previous = self._writing.get(key)
        task = asyncio.ensure_future(self._write_after(previous, group, topic_id, partition, leader_epoch, start,
                                                       batches))
        self._writing[key] = task
        task.add_done_callback(lambda done: self._writing.pop(key) if self._writing.get(key) is done else None)
        return task

    async def _write_after(self, previous: asyncio.Future[None] | None, group: str, topic_id: uuid.UUID,
                           partition: int, leader_epoch: int, start: int, batches: list[Run]) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        self.remote_writes += 1
        body = wr.WriteShareGroupStateRequest(group, [wr.WriteStateData(topic_id, [wr.PartitionData(
            partition, -1, leader_epoch, start, -1, [wr.StateBatch(*b) for b in batches])])])
        await self._call(group, topic_id, partition, WRITE, 1, body,
                         lambda rpcs: rpcs.write(group, topic_id, partition, -1, leader_epoch, start, batches))

    async def _call(self, group: str, topic_id: uuid.UUID, partition: int, api_key: int, version: int, body: Any,
                    in_process: Any) -> StateAnswer:
        deadline = time.monotonic() + RETRY_FOR_S
        backoff = BACKOFF_S
        while True:
            answer = await self._once(group, topic_id, partition, api_key, version, body, in_process)
            if answer.error == E.NONE:
                return answer
            if answer.error not in RETRIABLE or time.monotonic() + backoff > deadline:
                code = answer.error if answer.error not in RETRIABLE else E.COORDINATOR_NOT_AVAILABLE
                raise KafkaError(f"share state of {group}:{topic_id}:{partition}: {answer.message or code.name}", code)
            self.retries += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _once(self, group: str, topic_id: uuid.UUID, partition: int, api_key: int, version: int, body: Any,
                    in_process: Any) -> StateAnswer:
        broker = self.broker
        info = broker.catalogue.topic(TOPIC)
        if info is None:
            return StateAnswer(E.COORDINATOR_NOT_AVAILABLE)
        led = broker.catalogue.leadership(TOPIC, partition_for(group, topic_id, partition, info.num_partitions))
        if led is None or led.leader < 0:
            return StateAnswer(E.COORDINATOR_NOT_AVAILABLE, "the state partition has no leader")
        if led.leader == broker.node_id:  # it moved here meanwhile
            answer = in_process(ShareStateRpcs(broker))
            return await answer if asyncio.iscoroutine(answer) else answer
        if self.listener is None:
            if not self._told_no_listener:
                self._told_no_listener = True
                log.error("share_persister_no_listener", reason="no PLAINTEXT listener to reach the other nodes")
            return StateAnswer(E.COORDINATOR_NOT_AVAILABLE, "no inter-node listener")
        endpoint = broker.node_endpoint(led.leader, self.listener)
        if endpoint is None:
            return StateAnswer(E.COORDINATOR_NOT_AVAILABLE, f"node {led.leader} is not up")
        try:
            response = await self.client.call(led.leader, *endpoint, api_key, version, body)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            log.info("share_persister_connection_lost", node=led.leader, error=repr(exc))
            return StateAnswer(E.COORDINATOR_NOT_AVAILABLE, repr(exc))
        result = response.results[0].partitions[0]
        if result.error_code:
            return StateAnswer(ErrorCode(result.error_code), result.error_message)
        if api_key == WRITE:
            return StateAnswer()
        if api_key == SUMMARY:
            return StateAnswer(E.NONE, None, result.state_epoch, result.leader_epoch, result.start_offset,
                               complete=result.delivery_complete_count)
        return StateAnswer(E.NONE, None, result.state_epoch, 0, result.start_offset,
                           [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                            for b in result.state_batches])

    async def close(self) -> None:
        await self.client.close()
