"""A partition's checkpoint file, `checkpoint.json`: its log start offset (DeleteRecords, retention),
its recovery point (the first segment a crash may have left unsynced), the log end at the last
clean close, and its leader-epoch history (epochs.py). Kafka keeps these in four files
(log-start-offset-checkpoint, recovery-point-offset-checkpoint, the clean-shutdown marker and
leader-epoch-checkpoint); one small file per partition does here.

Written whole and durably (write-temp, fsync, rename) with a checksum (broker/storage/checksummed.py).
A file that does not parse, lacks a field or fails its checksum is not trusted: the log loads as if
it had none (every segment recovered, the log start at the first segment, no tail check), with an
error event for damage, and the leader-epoch history is rebuilt from the batches' headers. A file
without a checksum (an older kbroker's) is read as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from .. import checksummed
from .epochs import LeaderEpochs
from .files import write_file_durably

log = structlog.get_logger("kbroker.broker.storage.log.checkpoint")

CHECKPOINT_FILE = "checkpoint.json"


@dataclass(slots=True)
class Checkpoint:
    log_start_offset: int | None = None  # None: no trustworthy checkpoint
    recovery_point: int = 0
    log_end_offset: int | None = None  # only after a clean close
    epochs: LeaderEpochs = field(default_factory=LeaderEpochs)
    damaged: bool = False  # a file was there but could not be trusted


def read_checkpoint(directory: str, topic: str, partition: int) -> Checkpoint:
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return Checkpoint()
    try:
        body = checksummed.loads(raw).body
        end = body.get("log_end_offset")
        return Checkpoint(int(body["log_start_offset"]), int(body["recovery_point"]),
                          None if end is None else int(end), LeaderEpochs.from_json(body.get("leader_epochs", [])))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.error("checkpoint_damaged", topic=topic, partition=partition, file=path, error=str(exc),
                  action="treated as missing: the log start falls back to the first segment, the epoch "
                         "history is rebuilt from the batches")
        return Checkpoint(damaged=True)


def write_checkpoint(directory: str, log_start_offset: int, recovery_point: int, epochs: LeaderEpochs,
                     log_end_offset: int | None = None) -> None:
    body: dict[str, object] = {"log_start_offset": log_start_offset, "recovery_point": recovery_point}
    if log_end_offset is not None:
        body["log_end_offset"] = log_end_offset
    if epochs.entries:
        body["leader_epochs"] = epochs.to_json()
    write_file_durably(Path(directory, CHECKPOINT_FILE), checksummed.dumps(body))
