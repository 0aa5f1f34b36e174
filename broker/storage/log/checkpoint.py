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

import asyncio
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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


class CheckpointWriter:
    """The checkpoint writes of one partition once a log start moved by a prune may be written later
    (`write_soon`): off the loop on the `checkpoints` worker, the prunes asked while one write runs
    sharing the next, as appends share an fsync round. A DeleteRecords answer or a share-state write's
    answer waits for it; until then a crash only takes the log start back, over records still there
    (a prune that deletes segments writes at once). Writes made at once (`write_now`: a new recovery
    point, an epoch, a truncation, the close) go through it too: each write is numbered when its
    content is taken, and one that finds a later-numbered content already on disk is skipped, so an
    older content never replaces a newer one. After `close` nothing is written later."""

    def __init__(self, directory: str, capture: Callable[[], tuple]) -> None:
        self.directory = directory
        self._capture = capture  # on the loop: write_checkpoint's arguments after the directory, as now
        self._lock = threading.Lock()
        self._taken = 0  # numbers given to contents so far
        self._on_disk = 0  # the number of the content the file holds
        self._waiting: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    def write_now(self, *content: Any) -> None:
        self._taken += 1
        self._write(self._taken, content)

    def write_soon(self) -> asyncio.Future[None]:
        """Resolved once a checkpoint holding the state as it is now is durable (or raises what the
        write raised)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append(future)
        if self._task is None:
            self._task = loop.create_task(self._write_waiting())
        return future

    def _write(self, number: int, content: tuple) -> None:
        with self._lock:  # the worker's write and the loop's never interleave
            if number > self._on_disk:
                write_checkpoint(self.directory, *content)
                self._on_disk = number

    async def _write_waiting(self) -> None:
        from ...workers import CHECKPOINTS, run_in_worker

        try:
            while self._waiting:
                waiting, self._waiting = self._waiting, []
                failure: BaseException | None = None
                if not self.closed:  # the close wrote the last checkpoint, which holds theirs
                    self._taken += 1
                    try:
                        await run_in_worker(CHECKPOINTS, self._write, self._taken, self._capture())
                    except Exception as exc:  # noqa: BLE001 - handed to those who wait
                        failure = exc
                for future in waiting:
                    if not future.done():
                        future.set_result(None) if failure is None else future.set_exception(failure)
        finally:
            self._task = None
