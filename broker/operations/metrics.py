"""The Prometheus exposition: one collector that reads the broker's state at scrape time.

Nothing here runs per request. Counters come from `broker/operations/observe.py` (plain Python updated by
the hooks); gauges (groups, members, lag, log end offsets, connections) are computed from the
live coordinator and logs when Prometheus scrapes, so they cannot drift from the truth. This is
the only module importing prometheus_client, and the broker imports it only with
`--metrics-listen`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ...protocol.topic_names import is_internal_topic
from .observe import Histogram, all_servers
from ...protocol.errors import ErrorCode

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def api_label(handler: Any) -> str:
    """`kbroker.broker.apis.join_group` -> `JoinGroup`."""
    module = getattr(handler, "__module__", "") or ""
    return "".join(part.capitalize() for part in module.rsplit(".", 1)[-1].split("_")) or "Unknown"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=labels)


def _add_histogram(family: HistogramMetricFamily, values: list[str], hist: Histogram) -> None:
    family.add_metric(values, hist.cumulative(), hist.sum)


class BrokerCollector:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def _api_names(self) -> dict[int, str]:
        return {key: api_label(route.handler) for key, route in self.broker.router.routes.items()}

    def collect(self):
        b = self.broker
        obs = b.observations
        names = self._api_names()

        requests = CounterMetricFamily("kbroker_requests", "Requests answered, per API and version",
                                       labels=["api", "version"])
        errors = CounterMetricFamily("kbroker_request_errors",
                                     "Requests that failed (the connection was closed instead of an answer)",
                                     labels=["api", "version"])
        for (key, version), n in sorted(obs.requests.items()):
            requests.add_metric([names.get(key, str(key)), str(version)], n)
        for (key, version), n in sorted(obs.errors.items()):
            errors.add_metric([names.get(key, str(key)), str(version)], n)
        yield requests
        yield errors
        answers = CounterMetricFamily("kbroker_error_answers",
                                      "Kafka error codes in answers, at any level (top, group, topic, "
                                      "partition), as Kafka's ErrorsPerSec counts them", labels=["api", "error"])
        for (key, code), n in sorted(obs.error_answers.items()):
            answers.add_metric([names.get(key, str(key)), _error_name(code)], n)
        yield answers
        latency = _histogram("kbroker_request_latency_seconds",
                             "From a request's frame read to its response ready (durability waits included)",
                             ["api"])
        for key, hist in sorted(obs.latency.items()):
            _add_histogram(latency, [names.get(key, str(key))], hist)
        yield latency

        bytes_in = CounterMetricFamily("kbroker_topic_bytes_in", "Record bytes appended by Produce", labels=["topic"])
        bytes_out = CounterMetricFamily("kbroker_topic_bytes_out", "Record bytes returned by Fetch", labels=["topic"])
        for topic, n in sorted(obs.bytes_in.items()):
            bytes_in.add_metric([topic], n)
        for topic, n in sorted(obs.bytes_out.items()):
            bytes_out.add_metric([topic], n)
        yield bytes_in
        yield bytes_out

        connections = sum(len(server._connections) for server in all_servers(b))
        yield GaugeMetricFamily("kbroker_connections", "Open client connections", value=connections)
        yield CounterMetricFamily("kbroker_connections_opened", "Client connections accepted",
                                  value=obs.connections_opened)
        yield GaugeMetricFamily("kbroker_unread_answer_bytes",
                                "Bytes read for Fetch answers that their clients have not taken yet",
                                value=b.unread_answers.held)
        yield GaugeMetricFamily("kbroker_unread_answer_limit_bytes",
                                "Unread answer bytes past which Fetch answers shrink (4 x fetch.max.bytes)",
                                value=b.unread_answers.limit)

        leo = GaugeMetricFamily("kbroker_log_end_offset", "Log end offset per partition", labels=["topic", "partition"])
        size = GaugeMetricFamily("kbroker_log_size_bytes", "Bytes on disk per partition", labels=["topic", "partition"])
        ends: dict[tuple[str, int], int] = {}
        loaded = b.logs.logs()
        dormant = b.logs.dormant_partitions()  # empty and unused: no log object (log/dormant.py)
        for topic, partition, end, nbytes in [*((p.topic, p.partition, p.log_end_offset, p.size_bytes) for p in loaded),
                                              *((t, p, end, 0) for t, p, end in dormant)]:
            ends[(topic, partition)] = end
            if is_internal_topic(topic) and end == 0:
                continue  # 50 empty __consumer_offsets partitions say nothing
            labels = [topic, str(partition)]
            leo.add_metric(labels, end)
            size.add_metric(labels, nbytes)
        yield leo
        yield size
        partitions = GaugeMetricFamily("kbroker_partitions", "Partitions by state: in use, or dormant (empty and "
                                       "unused since creation or start-up, holding no log object)", labels=["state"])
        partitions.add_metric(["loaded"], len(loaded))
        partitions.add_metric(["dormant"], len(dormant))
        yield partitions

        fsync = _histogram("kbroker_fsync_seconds", "fsync calls on log segments and their duration", [])
        _add_histogram(fsync, [], obs.fsync)
        yield fsync

        yield from self._groups(b, ends)
        yield from self._share_groups(b)

        rebalances = CounterMetricFamily("kbroker_rebalances", "Completed rebalances by reason",
                                         labels=["group_type", "reason"])
        for (group_type, reason), n in sorted(obs.rebalances.items()):
            rebalances.add_metric([group_type, reason], n)
        yield rebalances
        duration = _histogram("kbroker_rebalance_duration_seconds", "From a rebalance's start to its new generation", [])
        _add_histogram(duration, [], obs.rebalance_duration)
        yield duration

        stall = _histogram("kbroker_event_loop_stall_seconds",
                           "How late the event loop woke a 100 ms sleep (time it was blocked)", [])
        _add_histogram(stall, [], obs.loop_stall)
        yield stall
        yield GaugeMetricFamily("kbroker_event_loop_stall_max_seconds", "Longest event-loop stall seen",
                                value=obs.loop_stall_max_s)
        yield GaugeMetricFamily("kbroker_offsets_partitions_loaded", "__consumer_offsets partitions loaded",
                                value=b.offsets_partitions_loaded())
        share_state = getattr(b, "_share_state", None)  # built at start when __share_group_state exists
        yield GaugeMetricFamily("kbroker_share_state_partitions_loaded",
                                "__share_group_state partitions loaded by the share coordinator",
                                value=0 if share_state is None else share_state.loaded_partitions)
        if b.client_telemetry is not None:
            yield from self._client_telemetry(b.client_telemetry)

    @staticmethod
    def _client_telemetry(telemetry: Any):
        """The clients' own metrics (KIP-714, --client-metrics), one series per client instance and point;
        their points carry different labels, so each family is built sample by sample."""
        for name, kind, text, samples in telemetry.families():
            family = Metric(name, text, kind)  # a counter's family drops a `_total` its name ends in
            sample_name = f"{family.name}_total" if kind == "counter" else name
            for labels, value in samples:
                family.add_sample(sample_name, dict(labels), value)
            yield family
        yield GaugeMetricFamily("kbroker_client_telemetry_instances", "Client instances kbroker holds telemetry of",
                                value=len(telemetry.instances))
        yield GaugeMetricFamily("kbroker_client_telemetry_series", "Client metric series held (bounded)",
                                value=telemetry.series_count)
        yield CounterMetricFamily("kbroker_client_telemetry_dropped_series",
                                  "Client metric series not kept, for the bounds on instances and series",
                                  value=telemetry.dropped_series)
        rejected = CounterMetricFamily("kbroker_client_telemetry_rejected_pushes", "PushTelemetry answered an error",
                                       labels=["error"])
        for code, n in sorted(telemetry.rejected_pushes.items()):
            rejected.add_metric([_error_name(code)], n)
        yield rejected

    @staticmethod
    def _share_groups(b: Any):
        """Share groups' delivery (KIP-932), per group; absent until a share group has fetched."""
        in_flight = GaugeMetricFamily("kbroker_share_in_flight_records",
                                      "Records of share-partitions in flight (from the start offset), by state",
                                      labels=["group", "state"])
        totals = {name: CounterMetricFamily(f"kbroker_share_{name}", doc, labels=["group"]) for name, doc in (
            ("acquired_records", "Records acquired by share group members"),
            ("redelivered_records", "Records acquired again (delivery count above 1)"),
            ("archived_records", "Records archived by a reject or the delivery count limit"),
            ("lock_expiries", "Acquisition locks that expired"),
            ("dead_letter_records", "Archived records copied to the group's dead letter queue topic (KIP-1191)"),
            ("dead_letter_failures", "Archived records whose dead letter queue copy was refused or failed"))}
        manager = getattr(b, "_share_partitions", None)  # a scrape does not build it
        for group, row in sorted((manager.group_stats() if manager is not None else {}).items()):
            for state in ("available", "acquired", "acknowledged", "archived"):
                in_flight.add_metric([group, state], row[state])
            totals["acquired_records"].add_metric([group], row["acquired_total"])
            totals["redelivered_records"].add_metric([group], row["redelivered_total"])
            totals["archived_records"].add_metric([group], row["archived_total"])
            totals["lock_expiries"].add_metric([group], row["lock_expiries_total"])
            totals["dead_letter_records"].add_metric([group], row["dlq_written_total"])
            totals["dead_letter_failures"].add_metric([group], row["dlq_failed_total"])
        yield in_flight
        yield from totals.values()

    @staticmethod
    def _groups(b: Any, ends: dict[tuple[str, int], int]):
        by_state: Counter[tuple[str, str]] = Counter()
        members = GaugeMetricFamily("kbroker_group_members", "Members per group", labels=["group"])
        lag = GaugeMetricFamily("kbroker_consumer_lag", "Log end (high watermark) minus the committed offset",
                                labels=["group", "topic", "partition"])
        committed = GaugeMetricFamily("kbroker_consumer_committed_offset", "Committed offset",
                                      labels=["group", "topic", "partition"])
        rebalancing = GaugeMetricFamily("kbroker_group_rebalancing_seconds",
                                        "How long a group has been rebalancing (absent when it is not)",
                                        labels=["group"])
        coordinator = b.coordinator_if_built  # a scrape does not build it: no coordinator, no group
        now_ms = coordinator.clock.wall_ms() if coordinator is not None else 0
        for group in (coordinator.groups() if coordinator is not None else ()):
            by_state[(group.group_type, str(group.state))] += 1
            # A consumer group reconciles member by member: no group-wide rebalance (no `rebalance`).
            rebalance = getattr(group, "rebalance", None)
            if rebalance is not None:
                rebalancing.add_metric([group.group_id], max(now_ms - rebalance.started_ms, 0) / 1000)
            members.add_metric([group.group_id], len(group.members))
            for (topic, partition), offset in sorted(coordinator.offsets_of(group.group_id).items()):
                end = ends.get((topic, partition))
                labels = [group.group_id, topic, str(partition)]
                committed.add_metric(labels, offset.offset)
                if end is not None:
                    lag.add_metric(labels, max(end - offset.offset, 0))
        groups = GaugeMetricFamily("kbroker_groups", "Groups by type and state", labels=["group_type", "state"])
        for (group_type, state), n in sorted(by_state.items()):
            groups.add_metric([group_type, state], n)
        yield groups
        yield rebalancing
        yield members
        yield committed
        yield lag


def render(broker: Any) -> bytes:
    registry = getattr(broker, "_metrics_registry", None)
    if registry is None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker))
        broker._metrics_registry = registry
    return generate_latest(registry)
