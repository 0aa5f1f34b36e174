"""What `__transaction_state` lost, said and contained (issue 38, items 3 and 9).

The transaction log can lose records three ways: a batch damaged on disk (skipped at load: its
records are gone), a log cut short (its tail gone), a log whose records retention removed. Either way
a transactional id comes back older than it was, or not at all, while the data partitions still hold
what its producer wrote. Left alone, that is two failures nobody names:

- an open transaction whose Ongoing record was lost is never aborted, so read_committed consumers
  stop at its first offset for ever (the last stable offset cannot pass it);
- a transactional id that comes back at an older epoch bumps, on its producer's next InitProducerId,
  to an epoch its partitions have already seen, and every batch then fails with
  OUT_OF_ORDER_SEQUENCE_NUMBER (or INVALID_PRODUCER_EPOCH) with nothing saying why.

So, once every partition is replayed and before the broker serves, the data partitions' producer
states are read: an open transaction no loaded transaction covers is aborted (an ABORT marker at the
producer's epoch in each partition it is open in, `transaction_aborted_after_state_loss`); a
transactional id whose producer the partitions show at a newer epoch than the log is named
(`transaction_state_lost`) and gets a new producer id at its next InitProducerId, so its producer
starts clean. A damaged batch is named when it is skipped (`transaction_batch_skipped`), with the
transactional ids its bytes still show.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import structlog

from ...coordinator.txn.coordinator import COORDINATOR_EPOCH
from ...coordinator.txn.metadata import TxnState
from ...protocol.record_batch import CRC_OFFSET, compute_crc, decode_batch
from ...protocol.records.transaction_log import decode_key, decode_value

log = structlog.get_logger("kbroker.transactions")
S = TxnState
TOPIC = "__transaction_state"  # transactions.TOPIC (that module imports this one)


@dataclass(slots=True)
class DamagedBatch:
    """A batch of `__transaction_state` the load skipped, and what its bytes still say it held."""

    partition: int
    offset: int
    resume_offset: int
    reason: str
    file: str | None = None
    position: int | None = None
    # (transactional id, producer id or None, status or None) per record, as far as the bytes decode
    held: list[tuple[str, int | None, str | None]] = field(default_factory=list)
    undecodable: bool = False

    @classmethod
    def of(cls, partition: int, offset: int, end: int, exc: Exception) -> DamagedBatch:
        damaged = cls(partition, offset, getattr(exc, "resume_offset", end), getattr(exc, "reason", str(exc)),
                      getattr(exc, "file", None), getattr(exc, "position", None))
        damaged._decode(getattr(exc, "raw", None))
        return damaged

    def _decode(self, raw: bytes | None) -> None:
        """Best effort: the batch failed its checks, so its records are read past its CRC."""
        if not raw:
            self.undecodable = True
            return
        try:
            patched = bytearray(raw)
            struct.pack_into(">I", patched, CRC_OFFSET, compute_crc(patched, 0, len(patched)))
            _, records = decode_batch(patched)
        except Exception:  # noqa: BLE001 - framing lost too
            self.undecodable = True
            return
        for r in records:
            try:
                txn_id = decode_key(r.key or b"")
            except Exception:  # noqa: BLE001
                self.undecodable = True
                continue
            try:
                value = decode_value(r.value)
            except Exception:  # noqa: BLE001
                value = None
            status = None if value is None else _status_name(value.status)
            self.held.append((txn_id, None if value is None else value.producer_id, status))

    @property
    def transactional_ids(self) -> list[str]:
        return sorted({txn_id for txn_id, _, _ in self.held})

    def report(self) -> None:
        log.error("transaction_batch_skipped", partition=self.partition, offset=self.offset,
                  resume_offset=self.resume_offset, file=self.file, position=self.position, reason=self.reason,
                  transactional_ids=self.transactional_ids,
                  lost=[f"{txn_id} ({status or 'tombstone'}, producer {pid})" for txn_id, pid, status in self.held]
                  + (["records undecodable"] if self.undecodable else []))


def _status_name(status: int) -> str:
    try:
        return TxnState(status).kafka_name
    except ValueError:
        return f"status {status}"


async def contain_losses(service: Any) -> None:
    """After the load of every partition (the module docstring says what and why)."""
    broker = service.broker
    txns = {t.transactional_id: t for t in service.transactions()}
    # producer id -> transactional id: the loaded ones (current and previous producer ids), and what
    # the damaged batches still show
    owner: dict[int, str] = {}
    for txn in txns.values():
        owner[txn.producer_id] = txn.transactional_id
        if txn.last_producer_id >= 0:
            owner.setdefault(txn.last_producer_id, txn.transactional_id)
    for damaged in service.damaged:
        for txn_id, pid, _ in damaged.held:
            if pid is not None:
                owner.setdefault(pid, txn_id)
    # What the data partitions know of each producer: its newest epoch, where its transaction is open.
    seen: dict[int, int] = {}
    open_in: dict[int, list[tuple[str, int]]] = {}
    for plog in list(broker.logs.logs()):
        if plog.topic == TOPIC:
            continue
        state = broker.producer_states.for_log(plog)
        for pid, entry in state.producers.items():
            seen[pid] = max(seen.get(pid, -1), entry.epoch)
        for pid in state.ongoing:
            open_in.setdefault(pid, []).append((plog.topic, plog.partition))

    for txn in txns.values():
        newest = seen.get(txn.producer_id, -1)
        if newest > txn.producer_epoch:
            txn.state_lost = True  # its next InitProducerId gets a new producer id (coordinator.py)
            log.error("transaction_state_lost", transactional_id=txn.transactional_id,
                      partition=service.coordinator.partition_for(txn.transactional_id),
                      producer_id=txn.producer_id, logged_epoch=txn.producer_epoch, partitions_epoch=newest,
                      logged_state=txn.state.kafka_name,
                      detail="the transaction log lost this transactional id's newer records; its producer "
                             "gets a new producer id at its next InitProducerId")

    for pid, partitions in sorted(open_in.items()):
        txn_id = owner.get(pid)
        txn = txns.get(txn_id) if txn_id is not None else None
        # A transaction the log still holds open completes through the coordinator, unless the log is
        # behind its producer's epoch: its markers would then carry a stale epoch and be refused.
        live = (txn is not None and txn.producer_id == pid and not txn.state_lost
                and txn.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT))
        lost = [tp for tp in partitions if not (live and txn is not None and tp in txn.partitions)]
        if not lost:
            continue
        epoch = seen.get(pid, 0)
        await broker.partitions.write_markers(pid, epoch, False, lost, COORDINATOR_EPOCH)
        log.error("transaction_aborted_after_state_loss", producer_id=pid, producer_epoch=epoch,
                  transactional_id=txn_id, partitions=[f"{t}-{p}" for t, p in sorted(lost)],
                  detail="an open transaction the transaction log no longer knows: aborted, so read_committed "
                         "consumers go past it")
