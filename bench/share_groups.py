"""Share groups (KIP-932, issue 42): records/s through ShareFetch + ShareAcknowledge, 1 and 4 members.

    python -m bench.share_groups [--rounds N] [--records N] [--peers kafka] [--quick]

A topic of 4 partitions holds --records records of 100 bytes (produced before the clock starts); a new
share group (share.auto.offset.reset=earliest, set through the GROUP config resource) gets 1 or 4
members, each a raw connection of its own in a thread of this process: joined by ShareGroupHeartbeat
until every partition is assigned (4 members: one each), then each fetches (ShareFetch v1, MaxRecords
500, MaxWaitMs 500) and accepts every record it acquired in a ShareAcknowledge (explicit
acknowledgement, answered once the share-partition's state is durable) until every record is
acknowledged. The clock runs from the members' first fetch to the last acknowledgement's answer.
Each broker runs --rounds rounds (3) per member count, a new topic and group each; the median is the
figure, every round is printed with the spread. kbroker runs with --flush always (each
acknowledgement's state write fsynced before the answer) and never; Kafka at its default flush (no
fsync per write). Tansu serves no share groups: it is not measured.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kbroker.bench import brokers
from kbroker.bench.data_path import create_topic, produce
from kbroker.bench.report import (FULL_PEERS, KAFKA, KB_ALWAYS, KB_NEVER, NA, QUICK_PEERS, Figure, peers_arg,
                                  print_figures, run_labels)

LABELS = [KB_ALWAYS, KB_NEVER, KAFKA]  # Tansu has no share groups
PARTITIONS = 4
MEMBERS = (1, 4)
RECORD_BYTES = 100
ACCEPT = 1


@dataclass
class Sizes:
    rounds: int = 3
    records: int = 500_000
    labels: tuple[str, ...] = field(default_factory=lambda: run_labels(FULL_PEERS))

    @classmethod
    def quick(cls) -> Sizes:
        return cls(rounds=1, records=10_000, labels=run_labels(QUICK_PEERS))


class Member:
    """One share group member on a connection of its own (kbroker's test wire client)."""

    def __init__(self, bootstrap: str, group: str, topic: str, topic_id: Any) -> None:
        from kbroker.tests.integration.wire import Wire

        self.wire = Wire(bootstrap, client_id="bench-share")
        self.group, self.topic, self.topic_id = group, topic, topic_id
        self.id, self.member_epoch, self.session_epoch = str(uuid.uuid4()), 0, 0
        self.partitions: list[int] = []
        self.heartbeat([topic])

    def heartbeat(self, topics: list[str] | None = None) -> None:
        from kbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest

        answer = self.wire.call(76, 1, ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.id, member_epoch=self.member_epoch, rack_id=None,
            subscribed_topic_names=topics))
        if answer.error_code:
            raise RuntimeError(f"ShareGroupHeartbeat: error {answer.error_code} {answer.error_message}")
        self.member_epoch = answer.member_epoch
        if answer.assignment is not None:
            self.partitions = sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)

    def fetch(self) -> list[tuple[int, int, int]]:
        """(partition, first, last) of each run of records acquired."""
        from kbroker.protocol.messages.share_fetch_request import FetchPartition, FetchTopic, ShareFetchRequest

        topics = [] if self.session_epoch else [FetchTopic(topic_id=self.topic_id, partitions=[
            FetchPartition(partition_index=p, acknowledgement_batches=[]) for p in self.partitions])]
        answer = self.wire.call(78, 1, ShareFetchRequest(
            group_id=self.group, member_id=self.id, share_session_epoch=self.session_epoch, max_wait_ms=500,
            min_bytes=1, max_bytes=8 << 20, max_records=500, batch_size=500, topics=topics,
            forgotten_topics_data=[]))
        if answer.error_code:
            raise RuntimeError(f"ShareFetch: error {answer.error_code}")
        self.session_epoch += 1
        return [(p.partition_index, a.first_offset, a.last_offset)
                for t in answer.responses for p in t.partitions for a in p.acquired_records]

    def acknowledge(self, runs: list[tuple[int, int, int]], epoch: int | None = None) -> None:
        from kbroker.protocol.messages.share_acknowledge_request import (
            AcknowledgementBatch,
            AcknowledgePartition,
            AcknowledgeTopic,
            ShareAcknowledgeRequest,
        )

        by_partition: dict[int, list[AcknowledgementBatch]] = {}
        for partition, first, last in runs:
            by_partition.setdefault(partition, []).append(
                AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[ACCEPT]))
        answer = self.wire.call(79, 1, ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.id,
            share_session_epoch=self.session_epoch if epoch is None else epoch,
            topics=[AcknowledgeTopic(topic_id=self.topic_id, partitions=[
                AcknowledgePartition(partition_index=p, acknowledgement_batches=b) for p, b in by_partition.items()])]
            if by_partition else []))
        failed = [p.error_code for t in answer.responses for p in t.partitions if p.error_code]
        if answer.error_code or failed:
            raise RuntimeError(f"ShareAcknowledge: error {answer.error_code} {failed[:3]}")
        if epoch is None:
            self.session_epoch += 1

    def leave(self) -> None:
        try:
            self.acknowledge([], epoch=-1)
            self.member_epoch = -1
            self.heartbeat()
        finally:
            self.wire.close()


def _earliest(bootstrap: str, group: str) -> None:
    from kbroker.protocol.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kbroker.tests.integration.wire import Wire

    wire = Wire(bootstrap)
    try:
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False))
        if answer.responses[0].error_code:
            raise RuntimeError(f"share.auto.offset.reset: error {answer.responses[0].error_code}")
    finally:
        wire.close()


def _topic_id(bootstrap: str, topic: str) -> Any:
    from kbroker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from kbroker.tests.integration.wire import Wire

    wire = Wire(bootstrap)
    try:
        return wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])).topics[0].topic_id
    finally:
        wire.close()


def _joined(bootstrap: str, group: str, topic: str, members: int) -> list[Member]:
    """`members` members, heartbeating until the 4 partitions are assigned among them, each once."""
    topic_id = _topic_id(bootstrap, topic)
    team = [Member(bootstrap, group, topic, topic_id) for _ in range(members)]
    deadline = time.monotonic() + 60
    while sorted(p for m in team for p in m.partitions) != list(range(PARTITIONS)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{members} member(s) never had the {PARTITIONS} partitions: "
                               f"{[m.partitions for m in team]}")
        time.sleep(0.1)
        for m in team:
            m.heartbeat()
    return team


def _round(bootstrap: str, members: int, records: int) -> float:
    """Records acknowledged per second by `members` members of a new group on a new topic."""
    topic = f"bench-share-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-group"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, records, RECORD_BYTES)
    _earliest(bootstrap, group)
    team = _joined(bootstrap, group, topic, members)
    lock = threading.Lock()
    acknowledged = [0]
    errors: list[str] = []
    finished: list[float] = []

    def work(member: Member) -> None:
        try:
            last_heartbeat = time.monotonic()
            while acknowledged[0] < records and not errors:
                runs = member.fetch()
                if runs:
                    member.acknowledge(runs)
                    with lock:
                        acknowledged[0] += sum(last - first + 1 for _, first, last in runs)
                        if acknowledged[0] >= records and not finished:
                            finished.append(time.perf_counter())
                if time.monotonic() - last_heartbeat > 2:
                    member.heartbeat()
                    last_heartbeat = time.monotonic()
        except Exception as e:  # noqa: BLE001 - the round fails with the reason
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(m,)) for m in team]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for m in team:
        try:
            m.leave()
        except Exception:  # noqa: BLE001 - the figure is taken; a failed leave changes nothing
            pass
    if errors:
        raise RuntimeError(errors[0])
    if acknowledged[0] != records or not finished:
        raise RuntimeError(f"{acknowledged[0]} of {records} records acknowledged")
    return records / (finished[0] - started)


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[int, dict[str, list[float] | NA]] = {m: {} for m in MEMBERS}
    for label in [label for label in LABELS if label in sizes.labels]:
        if verbose:
            print(f"  share groups: {label} ...", flush=True)
        try:
            handle = brokers.start_label(label)
        except brokers.Unavailable as e:
            for m in MEMBERS:
                results[m][label] = NA(str(e))
            continue
        try:
            for m in MEMBERS:
                try:
                    rounds = [_round(handle.bootstrap, m, sizes.records) for _ in range(sizes.rounds)]
                except Exception as e:  # noqa: BLE001 - the figure is n/a with the reason
                    results[m][label] = NA(f"{type(e).__name__}: {str(e)[:200]}")
                    continue
                if verbose:
                    print(f"    {m} member(s): {', '.join(f'{r:,.0f}' for r in rounds)} records/s", flush=True)
                results[m][label] = rounds
        finally:
            handle.stop()
    return figures(results, sizes)


def figures(results: dict[int, dict[str, list[float] | NA]], s: Sizes) -> list[Figure]:
    out = []
    for members, by_label in results.items():
        f = Figure("share_groups", f"share group, {members} member(s): records acknowledged/s",
                   f"{s.records:,} records of {RECORD_BYTES} B on {PARTITIONS} partitions, a new share group of "
                   f"{members} raw member(s) (one connection and thread each): ShareFetch v1 (MaxRecords 500, "
                   "MaxWaitMs 500) then a ShareAcknowledge accepting what it acquired, until every record is "
                   f"acknowledged; first fetch to last answer; the median of {s.rounds} round(s), each printed",
                   "records/s", fmt=",.0f")
        for label, rounds in by_label.items():
            if isinstance(rounds, NA):
                f.values[label] = rounds
                continue
            f.values[label] = statistics.median(rounds)
            f.notes[label] = ("rounds " + ", ".join(f"{r:,.0f}" for r in rounds)
                              + f"; spread {max(rounds) - min(rounds):,.0f}/s")
        out.append(f)
    return out


def main(argv: list[str] | None = None) -> int:
    from kbroker.bench import cores
    from kbroker.broker.logging import configure_logging

    configure_logging("json", "warning")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    size_flags = {"rounds": "rounds per broker and member count", "records": "records per round"}
    for flag, what in size_flags.items():
        parser.add_argument(f"--{flag}", type=int, help=f"{what} (default {getattr(Sizes(), flag):,})")
    parser.add_argument("--peers", type=peers_arg, help=f"peers beside kbroker (default {','.join(FULL_PEERS)}; "
                                                        f"--quick: {','.join(QUICK_PEERS)}): only Kafka serves share groups")
    args = parser.parse_args(argv)
    cores.pin_generator()
    sizes = Sizes.quick() if args.quick else Sizes()
    sizes.labels = sizes.labels if args.peers is None else run_labels(args.peers)
    for flag in size_flags:
        setattr(sizes, flag, getattr(args, flag) or getattr(sizes, flag))
    print_figures(run(sizes), [label for label in LABELS if label in sizes.labels])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
