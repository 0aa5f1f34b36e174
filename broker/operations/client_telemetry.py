"""Client telemetry (KIP-714), on with `--client-metrics`: the clients' own metrics, pushed to the broker,
shown on /metrics per client instance.

What a client is told and what it may send follows Kafka 4.4's ClientMetricsManager: a client instance id
is handed out to a client that has none; a GetTelemetrySubscriptions or PushTelemetry sooner than the push
interval after the last is THROTTLING_QUOTA_EXCEEDED (a push right after a Get is always taken: clients
jitter their first push), a push with another subscription id UNKNOWN_SUBSCRIPTION_ID, one after a
terminating push INVALID_REQUEST, one larger than telemetry.max.bytes TELEMETRY_TOO_LARGE, one that is not
OTLP INVALID_RECORD; an instance no client has asked about for max(60 s, 3 push intervals) is forgotten.

Kafka keeps no subscriptions until an operator writes CLIENT_METRICS configs, so its clients push nothing;
kbroker has one built-in subscription instead: every metric ("*") of every client, every
`--client-metrics-interval-ms`. Counters are asked for cumulative (DeltaTemporality false, where Kafka
asks deltas of its plugins' behalf), so a lost push loses no counts and /metrics shows Prometheus
counters as they are; deltas a client sends anyway are added up.

Memory is bounded whatever clients send: at most MAX_INSTANCES instances (the least recently heard from
go first, as Kafka's LRU cache of 16384), MAX_SERIES_PER_INSTANCE series each and MAX_SERIES in all
(instances that pushed longest ago lose their series first), label values cut to MAX_LABEL_CHARS.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterator

import structlog

from ...protocol import compression
from ...protocol.crc import crc32c
from ...protocol.errors import ErrorCode
from ...protocol.otlp import DELTA, OtlpError, decode_metrics

log = structlog.get_logger("kbroker.client_telemetry")

# ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES: zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION = [compression.COMPRESSION_ZSTD, compression.COMPRESSION_LZ4, compression.COMPRESSION_GZIP,
                        compression.COMPRESSION_SNAPPY]
ALL_METRICS = "*"  # ClientMetricsConfigs.ALL_SUBSCRIBED_METRICS
CACHE_EXPIRY_MS = 60_000  # ClientMetricsManager.DEFAULT_CACHE_EXPIRY_MS
MAX_INSTANCES = 16384  # ClientMetricsManager.CACHE_MAX_SIZE
MAX_SERIES_PER_INSTANCE = 2000
MAX_SERIES = 100_000
MAX_LABEL_CHARS = 256
MAX_INFLATED_FACTOR = 16  # a push inflates to at most this many times telemetry.max.bytes
RESERVED_IDS = (uuid.UUID(int=0), uuid.UUID(int=1))  # Uuid.RESERVED: ZERO_UUID and METADATA_TOPIC_ID
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_:]")
_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
# the labels kbroker sets on every series of a client; a point's own attribute of the same name is dropped
INSTANCE_LABELS = ("client_instance_id", "client_id", "client_source_address", "principal")


def java_uuid_hash(value: uuid.UUID) -> int:
    """org.apache.kafka.common.Uuid.hashCode()."""
    h = (value.int >> 64) ^ (value.int & (2**64 - 1))
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def subscription_id(metrics: list[str], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """ClientMetricsManager.computeSubscriptionId: CRC32C of the metrics set's Java toString and the
    interval, XOR the instance id's hash, as a signed int32."""
    text = f"[{', '.join(metrics)}]{push_interval_ms}".encode()
    value = crc32c(text) ^ java_uuid_hash(instance_id)
    return value - (1 << 32) if value >= 1 << 31 else value


def metric_name(name: str) -> str:
    """An OTLP metric name as a Prometheus one: `org.apache.kafka.producer.record.queue.time.avg` ->
    `org_apache_kafka_producer_record_queue_time_avg`."""
    text = _NAME_CHARS.sub("_", name)
    return text if text and not text[0].isdigit() else f"_{text}"


def label_name(name: str) -> str:
    text = _LABEL_CHARS.sub("_", name)
    return text if text and not text[0].isdigit() else f"_{text}"


@dataclass(slots=True)
class Instance:
    instance_id: uuid.UUID
    labels: tuple[tuple[str, str], ...]  # INSTANCE_LABELS' values
    subscription_id: int
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    expires_ms: int = 0
    pushed_ms: int = 0  # the last push whose metrics were taken
    # (metric name, labels) -> (kind, help, value)
    series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, str, float]] = field(default_factory=dict)

    def may_get(self, now: int) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: int) -> bool:
        """ClientMetricsInstance.maybeUpdatePushRequestTimestamp: the first push after a Get is always
        taken (clients push between 0.5 and 1.5 intervals after it)."""
        if self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now
            return True
        return False


@dataclass(slots=True)
class Subscription:
    error: int
    instance_id: uuid.UUID = uuid.UUID(int=0)
    subscription_id: int = 0
    push_interval_ms: int = 0
    requested_metrics: list[str] = field(default_factory=list)


class ClientTelemetry:
    def __init__(self, push_interval_ms: int, max_bytes: int,
                 clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000)) -> None:
        self.push_interval_ms = push_interval_ms
        self.max_bytes = max_bytes  # telemetry.max.bytes
        self.clock_ms = clock_ms
        self.instances: OrderedDict[uuid.UUID, Instance] = OrderedDict()  # least recently heard from first
        self.series_count = 0
        self.dropped_series = 0  # series not kept for the bounds
        self.rejected_pushes: dict[int, int] = {}  # error code -> pushes answered with it

    # --- the two APIs -------------------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, client_id: str, peer: str, principal: str) -> Subscription:
        now = self.clock_ms()
        if instance_id == uuid.UUID(int=0):
            instance_id = uuid.uuid4()
            while instance_id in self.instances or instance_id in RESERVED_IDS:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, client_id, peer, principal, now)
        if not instance.may_get(now) and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                                     ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return Subscription(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        instance.last_error = ErrorCode.NONE
        return Subscription(ErrorCode.NONE, instance_id, instance.subscription_id, instance.push_interval_ms,
                            [ALL_METRICS])

    def push(self, instance_id: uuid.UUID, sub_id: int, terminating: bool, codec: int, payload: bytes | None,
             client_id: str, peer: str, principal: str) -> int:
        if instance_id in RESERVED_IDS:
            return self._rejected(ErrorCode.INVALID_REQUEST)
        now = self.clock_ms()
        instance = self._instance(instance_id, client_id, peer, principal, now)
        error = self._check_push(instance, sub_id, terminating, codec, payload, now)
        instance.terminating = terminating
        if error != ErrorCode.NONE:
            instance.last_error = error
            return self._rejected(error)
        if payload:
            try:
                raw = compression.decompress(codec, payload, limit=self.max_bytes * MAX_INFLATED_FACTOR,
                                             parts=compression.PartAllowance(10_000))
                resource, metrics = decode_metrics(raw, max_points=MAX_SERIES_PER_INSTANCE * 4)
            except (OtlpError, compression.TooManyParts, Exception) as exc:  # noqa: BLE001 - any bad payload
                log.info("client_telemetry_rejected", client_instance_id=str(instance_id), client_id=client_id,
                         error=str(exc)[:200])
                instance.last_error = ErrorCode.INVALID_RECORD
                return self._rejected(ErrorCode.INVALID_RECORD)
            self._take(instance, metrics, now)
        instance.last_error = ErrorCode.NONE
        return ErrorCode.NONE

    def _check_push(self, instance: Instance, sub_id: int, terminating: bool, codec: int, payload: bytes | None,
                    now: int) -> int:
        """ClientMetricsManager.validatePushRequest, in its order."""
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not instance.may_push(now) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if sub_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if codec not in compression.COMPRESSION_NAMES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if payload is not None and len(payload) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _rejected(self, error: int) -> int:
        self.rejected_pushes[error] = self.rejected_pushes.get(error, 0) + 1
        return error

    # --- instances and their series -----------------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, client_id: str, peer: str, principal: str, now: int) -> Instance:
        self._expire(now)
        instance = self.instances.get(instance_id)
        if instance is None:
            while len(self.instances) >= MAX_INSTANCES:
                self._forget(next(iter(self.instances)))
            labels = (("client_instance_id", str(instance_id)), ("client_id", client_id[:MAX_LABEL_CHARS]),
                      ("client_source_address", peer.rsplit(":", 1)[0][:MAX_LABEL_CHARS]),
                      ("principal", principal[:MAX_LABEL_CHARS]))
            instance = self.instances[instance_id] = Instance(
                instance_id, labels, subscription_id([ALL_METRICS], self.push_interval_ms, instance_id),
                self.push_interval_ms)
        self.instances.move_to_end(instance_id)
        instance.expires_ms = now + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _expire(self, now: int) -> None:
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if oldest.expires_ms > now:
                return
            self._forget(oldest.instance_id)

    def _forget(self, instance_id: uuid.UUID) -> None:
        instance = self.instances.pop(instance_id)
        self.series_count -= len(instance.series)

    def _take(self, instance: Instance, metrics: list, now: int) -> None:
        """A push's points into the instance's series, within the bounds."""
        for metric in metrics:
            name = metric_name(metric.name)
            if name.startswith("kbroker_"):
                continue  # the broker's own names: a client's may not shadow them on /metrics
            kind = "counter" if metric.kind == "sum" and metric.monotonic else "gauge"
            for point in metric.points:
                labels = instance.labels + tuple(sorted(
                    (label_name(k), v[:MAX_LABEL_CHARS]) for k, v in point.attributes.items()
                    if label_name(k) not in INSTANCE_LABELS))[:16]
                key = (name, labels)
                old = instance.series.get(key)
                if old is None:
                    if len(instance.series) >= MAX_SERIES_PER_INSTANCE or not self._room(instance):
                        self.dropped_series += 1
                        continue
                    self.series_count += 1
                value = point.value
                if old is not None and metric.kind == "sum" and metric.temporality == DELTA:
                    value += old[2]
                instance.series[key] = (kind, metric.description[:256], value)
        instance.pushed_ms = now

    def _room(self, instance: Instance) -> bool:
        """Space for one more series in all, made by dropping the series of the instances that pushed
        longest ago (never the pushing one's)."""
        if self.series_count < MAX_SERIES:
            return True
        for other in sorted(self.instances.values(), key=lambda i: i.pushed_ms):
            if other is not instance and other.series:
                self.series_count -= len(other.series)
                self.dropped_series += len(other.series)
                other.series = {}
                if self.series_count < MAX_SERIES:
                    return True
        return False

    # --- what /metrics shows ------------------------------------------------------------------------------

    def families(self) -> Iterator[tuple[str, str, str, list[tuple[tuple[tuple[str, str], ...], float]]]]:
        """(metric name, kind, help, [(labels, value)]) per metric, over every client instance."""
        self._expire(self.clock_ms())
        by_name: dict[str, tuple[str, str, list]] = {}
        for instance in self.instances.values():
            for (name, labels), (kind, text, value) in instance.series.items():
                entry = by_name.get(name)
                if entry is None:
                    entry = by_name[name] = (kind, text or f"a client metric (KIP-714): {name}", [])
                if entry[0] == kind:
                    entry[2].append((labels, value))
        counters = {name for name, (kind, _, _) in by_name.items() if kind == "counter"}
        for name, (kind, text, samples) in sorted(by_name.items()):
            if kind == "gauge" and name.endswith("_total") and name[:-len("_total")] in counters:
                continue  # a counter's samples are named so: two families would share a sample name
            yield name, kind, text, samples
