"""The segment engine (broker/storage/api.py's LogEngine): every partition log of the broker, and the
topic records it keeps for the catalogue (broker/partitions/catalogue.py, the only caller for topics).

Layout of the data directory:
* `topics/<name>.json`: name, topic id, partition count, config overrides, leader epochs, the log
  ends seen at the last clean close; checksummed (topic_files.py; write-temp, fsync, rename).
* `<topic>-<partition>/`: one PartitionLog each (segments, indexes, checkpoint.json, producer snapshot).
* `.kbroker_clean_shutdown`: written by `close()`, removed at start-up; when present at start-up the
  logs skip the recovery scan (Kafka's `.kafka_cleanshutdown`).

The topic file is the source of truth: it is written before partition directories are created and
removed before they are deleted, so a crash leaves at worst a directory the next start sweeps. A
damaged one fences its topic (topic_files.py); a partition directory gone while its topic's record
says it held data is an error event naming the offsets lost, and the partition goes on from its old
end (`_missing_directory`).

A partition that holds nothing and is unused since creation or load keeps no PartitionLog, only a
base offset (dormant.py); `get_log` (and `store`) builds its log with the first use. Each log in use
hands out its PartitionStore (store.py), made with its first use.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import structlog

from ....protocol.errors import ErrorCode, KafkaError
from ....protocol.topic_names import InvalidTopicError, collision_key, validate_topic_name

from . import retention
from ....protocol.data_dir import TOPICS_DIR
from .config import FlushPolicy, LogConfig
if TYPE_CHECKING:
    from .cleaner import LogCleaner
from .dormant import DormantPartitions, sole_empty_segment
from .files import FILES, fsync_dir, write_file_durably
from .flusher import flush_dirty
from .partition_log import PartitionLog
from .store import FilePartitionStore
from .sync_batcher import SyncBatcher
from .topic_files import TopicInfo, read_topic_record
from ....purgatory.clock import Clock, SystemClock

log = structlog.get_logger(__name__)

CLEAN_SHUTDOWN_FILE = ".kbroker_clean_shutdown"
# Kafka has no such cap; ours bounds what one request can make the broker build (directories, files,
# per-partition state). File descriptors are bounded separately by the shared cache (files.py).
DEFAULT_MAX_PARTITIONS = 10_000
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)")


class LogManager:
    def __init__(
        self,
        data_dir: str | Path,
        default_config: LogConfig | None = None,
        flush_policy: FlushPolicy | str = "always",
        *,
        fsync: Callable[[int], None] = os.fsync,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        max_open_files: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.max_partitions = max_partitions
        if max_open_files:
            FILES.capacity = max(8, max_open_files)
        self._reserved_partitions = 0  # being created off the loop, counted against max_partitions
        self.default_config = default_config if default_config is not None else LogConfig()
        self._cleaner: LogCleaner | None = None  # compaction's own loop (cleaner.py), made with its first use
        self.flush_policy = FlushPolicy.parse(flush_policy)
        self._fsync = fsync
        self._sync_batcher = SyncBatcher()  # one for every log: see sync_batcher.py
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._topics: dict[str, TopicInfo] = {}
        # Bumped by every change of the topics table (a topic added or deleted, partitions added), so a
        # reader can keep what it derived from `topics()` until the table changes.
        self.topics_version = 0
        self._creating: set[str] = set()
        self._logs: dict[tuple[str, int], PartitionLog] = {}  # the partitions in use
        self._dormant = DormantPartitions()  # and those kept as a base offset until first use
        self._interval_task: asyncio.Task[None] | None = None
        self._closed = False
        # Told (topic, partition) when a partition's high watermark moves (the partition service
        # wakes the fetches waiting on it); every log holds this one bound method.
        self.high_watermark_listener: Callable[[str, int], object] | None = None
        self._hw_moved = self._high_watermark_moved
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / TOPICS_DIR).mkdir(exist_ok=True)
        self._load()
        self._start_interval_flusher()

    # --- start-up -------------------------------------------------------------------------------------

    def _load(self) -> None:
        started = time.monotonic()
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        had_marker = marker.exists()
        # A directory with no topics yet is a first start, not a crash: there is nothing to recover.
        first_start = not any((self.data_dir / TOPICS_DIR).glob("*.json"))
        clean = had_marker or first_start
        for doomed in self.data_dir.glob("*-delete"):
            if doomed.is_dir():
                import shutil  # only here: shutil imports bz2 and lzma, ~2 ms of every start

                shutil.rmtree(doomed, ignore_errors=True)
        found: dict[str, set[int]] = {}  # the partition directories there are, by topic
        with os.scandir(self.data_dir) as children:  # one entry per partition: no Path or stat each
            for child in children:
                match = _PARTITION_DIR.fullmatch(child.name)
                if match and child.is_dir():
                    found.setdefault(match["topic"], set()).add(int(match["partition"]))
        for meta_path in sorted((self.data_dir / TOPICS_DIR).glob("*.json")):
            info = read_topic_record(meta_path, self.default_config, len(found.get(meta_path.stem, ())))
            self._topics[info.name] = info
            self.topics_version += 1
            if info.damaged is not None:
                continue  # fenced (topic_files.py): its partitions stay as they are on disk, unopened
            dirs = found.get(info.name, set())
            for partition in range(info.num_partitions):
                self._open_log(info, partition, clean, partition in dirs)
        for topic, partitions in found.items():
            owner = self._topics.get(topic)
            for partition in partitions:
                if owner is None or partition >= owner.num_partitions:
                    log.warning("orphan_partition_dir", dir=self._partition_dir(topic, partition))
        if had_marker:
            marker.unlink()  # from here on, a crash must be treated as unclean
            fsync_dir(self.data_dir)
        log.info(
            "logs_loaded",
            data_dir=str(self.data_dir),
            topics=len(self._topics),
            partitions=self.partition_count,
            dormant=len(self._dormant),
            clean_shutdown=clean,
            first_start=first_start,
            load_ms=round(1000 * (time.monotonic() - started), 1),
        )

    def _partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def _open_log(self, info: TopicInfo, partition: int, clean: bool, exists: bool) -> None:
        if not exists:
            self._missing_directory(info, partition)
            return
        # A directory holding one empty segment and nothing else loads as exactly that: dormant at its
        # base, with no log object built and dropped (a restart among thousands of empty partitions).
        base = sole_empty_segment(self._partition_dir(info.name, partition))
        if base is not None:
            self._dormant.add(info.name, partition, base)
            return
        self._keep(self._make_log(info, partition, clean))

    def _missing_directory(self, info: TopicInfo, partition: int) -> None:
        """A partition whose directory is gone. If its topic's record says it held data, that data is
        lost: an error event names the offsets, and the partition starts again, empty, at the old
        log end, so that no offset a consumer has seen is handed out again. Otherwise (created
        while the broker was stopped, say) it is made empty, as a new partition is."""
        base = info.log_ends.get(partition, 0)
        if base > 0:
            log.error("partition_directory_missing", topic=info.name, partition=partition,
                      directory=self._partition_dir(info.name, partition), lost_offsets_below=base,
                      action=f"the partition starts again, empty, at offset {base}")
        PartitionLog.create_empty(self._partition_dir(info.name, partition), base)
        self._dormant.add(info.name, partition, base)

    def _keep(self, plog: PartitionLog) -> None:
        """A loaded or new log joins the table; one that holds nothing is kept dormant (dormant.py)."""
        if plog.untouched_empty:
            self._dormant.add(plog.topic, plog.partition, plog.log_start_offset)
        else:
            self._logs[(plog.topic, plog.partition)] = plog

    def _wake(self, info: TopicInfo, partition: int) -> PartitionLog | None:
        """The log of a dormant partition, built from the base offset its load found (no file is read)."""
        base = self._dormant.take(info.name, partition)
        if base is None:
            return None
        return self._make_log(info, partition, clean=True, empty_at=base)

    def _make_log(self, info: TopicInfo, partition: int, clean: bool, empty_at: int | None = None) -> PartitionLog:
        return PartitionLog(
            self._partition_dir(info.name, partition),
            info.name,
            partition,
            info.config,
            flush_policy=self.flush_policy,
            clean_shutdown=clean,
            fsync=self._fsync,
            batcher=self._sync_batcher,
            clock=self.clock,
            empty_at=empty_at,
            hw_listener=self._hw_moved,
        )

    def _high_watermark_moved(self, topic: str, partition: int) -> None:
        listener = self.high_watermark_listener
        if listener is not None:
            listener(topic, partition)

    def _start_interval_flusher(self) -> None:
        if self.flush_policy.kind != "interval" or self._interval_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: call start() from inside one
        self._interval_task = loop.create_task(self._interval_flush_loop(), name="log-interval-flush")

    async def start(self) -> None:
        self._start_interval_flusher()

    async def _interval_flush_loop(self) -> None:
        # One shared task for every log (see flusher.py): each tick snapshots all dirty segments on the
        # loop, fsyncs them in one worker-thread call, then advances each log's durable offset.
        interval = self.flush_policy.interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.flush_dirty_logs()

    async def flush_dirty_logs(self) -> None:
        """One `interval:MS` tick: every log's dirty segments in one worker-thread call."""
        await flush_dirty(list(self._logs.values()), self._fsync)

    # --- topics ---------------------------------------------------------------------------------------

    def _meta_path(self, name: str) -> Path:
        return self.data_dir / TOPICS_DIR / f"{name}.json"

    def _require(self, name: str, *, intact: bool = False) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(f"unknown topic {name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if intact and info.damaged is not None:
            raise KafkaError(f"topic {name!r} is fenced: its record is damaged ({info.damaged})",
                             ErrorCode.KAFKA_STORAGE_ERROR)
        return info

    def _check_partition_budget(self, adding: int) -> None:
        total = self.partition_count + self._reserved_partitions + adding
        if total > self.max_partitions:
            log.warning("partition_limit_refused", requested=adding, existing=self.partition_count,
                        max_partitions=self.max_partitions)
            raise KafkaError(
                f"{adding} more partition(s) would make {total} on this broker; its limit (max.partitions) "
                f"is {self.max_partitions}",
                ErrorCode.POLICY_VIOLATION,
            )

    def _new_topic(self, name: str, num_partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None,
                   allow_internal_configs: bool, replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics or name in self._creating:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        clash = next((t for t in (*self._topics, *self._creating) if collision_key(t) == collision_key(name)), None)
        if clash is not None:
            raise InvalidTopicError(f"topic {name!r} collides with existing topic {clash!r} ('.' vs '_')")
        if num_partitions < 1:
            raise KafkaError(f"number of partitions must be at least 1, not {num_partitions}", ErrorCode.INVALID_PARTITIONS)
        config = LogConfig.from_topic_configs(configs, self.default_config, allow_internal=allow_internal_configs)
        self._check_partition_budget(num_partitions)
        if topic_id is None or topic_id.int == 0:
            topic_id = uuid.uuid4()
        return TopicInfo(name, topic_id, num_partitions, config, config.override_dict(), replicas=dict(replicas or {}))

    def _build_logs(self, info: TopicInfo, partitions: range) -> list[PartitionLog | int]:
        """The file work of a creation: the topic file first, then the partition directories. A new
        partition gets its files and no log object (it is dormant: its number stands for it); one whose
        directory an earlier topic of that name left behind is loaded.

        A storage failure (a full disk) is KAFKA_STORAGE_ERROR, with the topic file put back as it was
        (none for a new topic), so a restart finds the topic as the failed request left it. The
        directories already made stay, empty, as a deleted topic's leftovers would."""
        made: list[PartitionLog | int] = []
        try:
            write_file_durably(self._meta_path(info.name), info.to_json())
            for partition in partitions:
                if PartitionLog.create_empty(self._partition_dir(info.name, partition)):
                    made.append(partition)
                else:
                    made.append(self._make_log(info, partition, clean=True))
            fsync_dir(self.data_dir)
        except OSError as exc:
            for plog in made:
                if isinstance(plog, PartitionLog):
                    plog.close()
            self._restore_meta(info, partitions.start)
            log.error("topic_files_failed", topic=info.name, partitions=f"{partitions.start}-{partitions.stop - 1}",
                      error=repr(exc))
            raise KafkaError(f"storage failure making the files of topic {info.name!r}: {exc}",
                             ErrorCode.KAFKA_STORAGE_ERROR) from exc
        return made

    def _restore_meta(self, info: TopicInfo, old_total: int) -> None:
        """The topic file as it was with `old_total` partitions; with 0, no file (no topic)."""
        try:
            if old_total == 0:
                self._meta_path(info.name).unlink(missing_ok=True)
                fsync_dir(self._meta_path(info.name).parent)
            else:
                write_file_durably(self._meta_path(info.name), self._grown(info, old_total).to_json())
        except OSError as exc:  # the disk refuses even that: start-up will say what it finds
            log.error("topic_file_restore_failed", topic=info.name, error=repr(exc))

    def _register(self, info: TopicInfo, logs: list[PartitionLog | int]) -> None:
        self._topics[info.name] = info
        self.topics_version += 1
        for plog in logs:
            if isinstance(plog, int):
                self._dormant.add(info.name, plog, 0)
            else:
                self._keep(plog)

    def _delete_built(self, info: TopicInfo, logs: list[PartitionLog | int]) -> None:
        """Remove what `_build_logs` made, for a topic deleted while its partitions were being made."""
        for plog in logs:
            if isinstance(plog, int):
                plog = self._make_log(info, plog, clean=True, empty_at=0)
            plog.delete()

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
        *,
        validate_only: bool = False,
        allow_internal_configs: bool = False,
        replicas: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        """Create a topic synchronously (start-up, auto-creation, tools). Requests use create_topic_async.
        `replicas`: the catalogue's placement of its partitions (several nodes), kept in its record."""
        info = self._new_topic(name, num_partitions, configs, topic_id, allow_internal_configs, replicas)
        if validate_only:
            return info
        self._register(info, self._build_logs(info, range(num_partitions)))
        log.info("topic_created", topic=name, topic_id=str(info.topic_id), partitions=num_partitions,
                 configs=info.overrides)
        return info

    async def create_topic_async(
        self, name: str, num_partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None, *,
        validate_only: bool = False, replicas: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        """CreateTopics: thousands of partitions mean thousands of directories and fsyncs, so the files
        are made in a worker thread while the loop keeps serving; the name is reserved meanwhile."""
        info = self._new_topic(name, num_partitions, configs, topic_id, False, replicas)
        if validate_only:
            return info
        self._creating.add(name)
        self._reserved_partitions += num_partitions
        try:
            logs = await asyncio.to_thread(self._build_logs, info, range(num_partitions))
        finally:
            self._creating.discard(name)
            self._reserved_partitions -= num_partitions
        self._register(info, logs)
        log.info("topic_created", topic=name, topic_id=str(info.topic_id), partitions=num_partitions,
                 configs=info.overrides)
        return info

    def delete_topic(self, name: str) -> None:
        info = self._require(name)
        meta = self._meta_path(name)
        meta.unlink()
        fsync_dir(meta.parent)
        del self._topics[name]
        self.topics_version += 1
        # Out of the tables first, every partition: a failure in the file work below leaves none behind.
        doomed = [self._logs.pop((name, partition), None) or self._wake(info, partition)
                  for partition in range(info.num_partitions)]
        for plog in doomed:
            if plog is not None:
                plog.delete()
        if info.damaged is not None:  # a fenced topic's partitions were never opened
            for partition in range(info.num_partitions):
                directory = self._partition_dir(name, partition)
                if os.path.isdir(directory):
                    PartitionLog.remove_directory(Path(directory))
        if self._cleaner is not None:
            self._cleaner.forget_deleted()  # its entries out of cleaner-offset-checkpoint
        log.info("topic_deleted", topic=name, topic_id=str(info.topic_id))

    def _check_new_partitions(self, name: str, new_total: int) -> TopicInfo:
        info = self._require(name, intact=True)
        if name in self._creating:
            raise KafkaError(f"partitions of topic {name!r} are being created", ErrorCode.REASSIGNMENT_IN_PROGRESS)
        if new_total <= info.num_partitions:
            raise KafkaError(
                f"topic {name!r} has {info.num_partitions} partitions; the new count must be larger, not {new_total}",
                ErrorCode.INVALID_PARTITIONS,
            )
        self._check_partition_budget(new_total - info.num_partitions)
        return info

    def _grown(self, info: TopicInfo, new_total: int, replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        return TopicInfo(info.name, info.topic_id, new_total, info.config, info.overrides, info.leader_epochs,
                         info.log_ends, replicas={**info.replicas, **(replicas or {})}, leaders=info.leaders,
                         adding=info.adding, removing=info.removing)

    def add_partitions(self, name: str, new_total: int, *, validate_only: bool = False) -> TopicInfo:
        info = self._check_new_partitions(name, new_total)
        if validate_only:
            return info
        old_total = info.num_partitions
        grown = self._grown(info, new_total)
        logs = self._build_logs(grown, range(old_total, new_total))
        info.num_partitions = new_total
        self._register(info, logs)
        log.info("partitions_added", topic=name, partitions=new_total)
        return info

    async def add_partitions_async(self, name: str, new_total: int, *, validate_only: bool = False,
                                   replicas: dict[int, list[int]] | None = None) -> TopicInfo:
        """CreatePartitions, with the file work in a worker thread (see create_topic_async);
        `replicas`: the new partitions' placement (several nodes)."""
        info = self._check_new_partitions(name, new_total)
        if validate_only:
            return info
        old_total = info.num_partitions
        added = new_total - old_total
        self._creating.add(name)
        self._reserved_partitions += added
        try:
            logs = await asyncio.to_thread(self._build_logs, self._grown(info, new_total, replicas),
                                           range(old_total, new_total))
        except KafkaError:
            if self._topics.get(name) is not info:  # deleted meanwhile: the failure put its file back
                self._restore_meta(info, 0)
            raise
        finally:
            self._creating.discard(name)
            self._reserved_partitions -= added
        if self._topics.get(name) is not info:  # deleted meanwhile (and not re-created: _creating holds the name)
            self._delete_built(info, logs)
            self._meta_path(name).unlink(missing_ok=True)  # the worker wrote it back after the deletion
            fsync_dir(self._meta_path(name).parent)
            raise KafkaError(f"topic {name!r} was deleted", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        info.num_partitions = new_total
        if replicas:
            info.replicas.update(replicas)
        self._register(info, logs)
        log.info("partitions_added", topic=name, partitions=new_total)
        return info

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> TopicInfo:
        """Replace the topic's overrides with `configs` (AlterConfigs semantics; callers doing incremental
        changes pass the merged dict)."""
        info = self._require(name, intact=True)
        config = LogConfig.from_topic_configs(configs, self.default_config,
                                              allow_internal="internal.segment.bytes" in info.overrides)
        if validate_only:
            return info
        info.config = config
        info.overrides = config.override_dict()
        self.write_topic_record(info)
        for partition in range(info.num_partitions):
            plog = self._logs.get((name, partition))
            if plog is not None:
                plog.config = config
        log.info("topic_configs_altered", topic=name, configs=info.overrides)
        return info

    async def alter_topic_configs_async(self, name: str, configs: dict[str, str], *,
                                        validate_only: bool = False) -> TopicInfo:
        return self.alter_topic_configs(name, configs, validate_only=validate_only)  # one small file: at once

    async def delete_topic_async(self, name: str) -> None:
        self.delete_topic(name)

    def set_default_config(self, default: LogConfig) -> None:
        """The broker-wide topic defaults changed (a dynamic broker config): every topic's config is its
        own overrides over the new defaults, at once for the logs in use (Kafka's
        DynamicLogConfig.reconfigure). A fenced topic keeps what it has."""
        self.default_config = default
        for info in self._topics.values():
            if info.damaged:
                continue
            config = LogConfig.from_topic_configs(info.overrides, default, allow_internal=True)
            info.config = config
            for partition in range(info.num_partitions):
                plog = self._logs.get((info.name, partition))
                if plog is not None:
                    plog.config = config
        self.topics_version += 1

    def write_topic_record(self, info: TopicInfo) -> None:
        """Persist what the catalogue changed of a topic (its configs, a partition's leader epoch)."""
        write_file_durably(self._meta_path(info.name), info.to_json())

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        """One topic's info, without copying the table (every OffsetCommit looks its topics up)."""
        return self._topics.get(name)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log, built now if it was dormant (and the same object from then on). On the
        event loop only: waking changes the tables (worker threads use `loaded_log`)."""
        plog = self._logs.get((topic, partition))
        if plog is None and self._dormant and not self._closed:
            info = self._topics.get(topic)
            plog = self._wake(info, partition) if info is not None else None
            if plog is not None:
                self._logs[(topic, partition)] = plog
        return plog

    def store(self, topic: str, partition: int) -> FilePartitionStore | None:
        """The partition's PartitionStore (broker/storage/api.py), built with its log's first use."""
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self.get_log(topic, partition)
            if plog is None:
                return None
        store = plog.store
        if store is None:
            store = plog.store = FilePartitionStore(plog)
        return store  # type: ignore[return-value]

    def loaded_store(self, topic: str, partition: int) -> FilePartitionStore | None:
        """The store of a partition in use; None for a dormant or unknown one (nothing is built)."""
        plog = self._logs.get((topic, partition))
        return None if plog is None else self.store(topic, partition)

    def loaded_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it is in use; None for a dormant or unknown one (nothing is built)."""
        return self._logs.get((topic, partition))

    def has_partition(self, topic: str, partition: int) -> bool:
        """Whether the partition exists, without building a dormant one's log."""
        key = (topic, partition)
        return key in self._logs or key in self._dormant

    def partition_size(self, topic: str, partition: int) -> int | None:
        """Bytes on disk of the partition's segments (None: no such partition), without building a log."""
        plog = self._logs.get((topic, partition))
        if plog is not None:
            return plog.size_bytes
        return 0 if (topic, partition) in self._dormant else None

    @property
    def partition_count(self) -> int:
        return len(self._logs) + len(self._dormant)

    def logs(self) -> list[PartitionLog]:
        """The partitions in use: what background work and shutdown visit (a dormant one needs neither)."""
        return list(self._logs.values())

    def dormant_partitions(self) -> list[tuple[str, int, int]]:
        """(topic, partition, log end offset) of each dormant partition: empty, so its end is its start."""
        return list(self._dormant.items())

    # --- background maintenance -----------------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Retention then compaction, synchronously (tests, tools). Returns the segments retention deleted."""
        from . import compaction  # imported with the first clean-up, not at start-up

        deleted = 0
        for plog in list(self._logs.values()):
            deleted += retention.apply_retention(plog, now_ms)
            if plog.config.compact:
                compaction.compact(plog, now_ms)
        return deleted

    async def run_retention(self, now_ms: int) -> int:
        """The periodic retention check (log.retention.check.interval.ms): cheap unlinks, on the loop.
        Compaction is the cleaner's (cleaner.py), on its own cadence."""
        deleted = 0
        for plog in list(self._logs.values()):
            if not plog.closed:
                deleted += retention.apply_retention(plog, now_ms)
        return deleted

    @property
    def cleaner(self) -> LogCleaner:
        """The log cleaner over the logs in use, made with its first use; the broker runs its loop."""
        if self._cleaner is None:
            from .cleaner import LogCleaner

            self._cleaner = LogCleaner(self.logs, self.clock.wall_ms, self.data_dir)
        return self._cleaner

    def wake_cleaner(self) -> None:
        """A compaction knob changed: the cleaner looks again now."""
        if self._cleaner is not None:
            self._cleaner.wake()

    async def run_maintenance(self, now_ms: int) -> int:
        """Retention, then every compacted log cleaned whatever its dirty ratio (test controls, tools):
        unlinks on the loop, compaction's cleaning in a worker thread per partition so the loop never
        stalls on it."""
        from . import compaction  # imported with the first clean-up, not at start-up

        deleted = 0
        for plog in list(self._logs.values()):
            if plog.closed:
                continue
            deleted += retention.apply_retention(plog, now_ms)
            if plog.config.compact:
                try:
                    await compaction.compact_async(plog, now_ms)
                except Exception:
                    log.exception("compaction_failed", topic=plog.topic, partition=plog.partition)
        return deleted

    # --- shutdown -------------------------------------------------------------------------------------

    def _note_log_ends(self) -> None:
        """Each topic's record learns the log ends its partitions closed at (topic_files.py), so a
        partition directory that is gone at the next start is known to have held data."""
        ends: dict[str, dict[int, int]] = {}
        for (topic, partition), plog in self._logs.items():
            if plog.log_end_offset > 0:
                ends.setdefault(topic, {})[partition] = plog.log_end_offset
        for topic, partition, end in self._dormant.items():
            if end > 0:
                ends.setdefault(topic, {})[partition] = end
        for name, info in self._topics.items():
            new = ends.get(name, {})
            if info.damaged is None and new != info.log_ends:
                info.log_ends = new
                try:
                    write_file_durably(self._meta_path(name), info.to_json())
                except OSError as exc:
                    log.error("topic_record_write_failed", topic=name, error=repr(exc))

    def close(self) -> None:
        """Flush and close every log, then leave the clean-shutdown marker for the next start."""
        if self._closed:
            return
        self._closed = True
        if self._interval_task is not None:
            self._interval_task.cancel()
        offline = []
        for plog in self._logs.values():
            try:
                plog.close()
            except OSError as exc:  # a full disk at shutdown: that log is not cleanly closed
                log.error("log_close_failed", topic=plog.topic, partition=plog.partition, error=repr(exc))
                plog.flusher.fence(exc)
            if plog.fenced is not None:
                offline.append(f"{plog.topic}-{plog.partition}")
        if offline:
            # A fenced log was not flushed: the next start must recover rather than trust it.
            log.error("unclean_shutdown", offline_logs=offline)
            return
        self._note_log_ends()
        write_file_durably(self.data_dir / CLEAN_SHUTDOWN_FILE, b"")
        log.info("logs_closed", partitions=len(self._logs), dormant=len(self._dormant))
