"""Data path (issue 3): produce and consume throughput and end-to-end latency, kbroker beside its peers.

    python -m bench.data_path [--messages N] [--size BYTES] [--partitions P] [--repeat R]
                              [--latency-rate MSGS_PER_S] [--latency-seconds S] [--peers tansu,kafka] [--quick]

Every figure is measured with confluent-kafka (librdkafka) against each broker in turn, started fresh
as a subprocess on loopback: kbroker with `--flush always` (its default: acks after an fsync group
commit), kbroker with `--flush never` (page cache only, like a memory store), Tansu with memory
storage (nothing reaches a disk), and Apache Kafka 4.4 at its default flush (acks after the page
cache, no fsync per write) and with `log.flush.interval.messages=1` (an fsync of every append before
its acknowledgement). The cost curves by partition count are kbroker `--flush always` and Tansu only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from operator import length_hint

from kbroker.bench import brokers, cores
from kbroker.bench.report import (FULL_PEERS, KB_ALWAYS, LABELS, NA, PEER, QUICK_PEERS, Figure, machine_note,
                                  peers_arg, print_figures, run_labels)



@dataclass
class Sizes:
    messages: int = 200_000
    size: int = 1024
    partitions: int = 3
    latency_rate: int = 1000
    latency_seconds: float = 10.0
    repeat: int = 3
    partition_counts: tuple[int, ...] = (1, 100, 1_000)   # the cost curve, kbroker --flush always and Tansu
    curve_messages: int = 100_000
    labels: tuple[str, ...] = field(default_factory=lambda: run_labels(FULL_PEERS))  # the brokers measured
    cluster: bool = True  # the produce and consume runs again through `kbroker serve --nodes 3`

    @classmethod
    def quick(cls) -> Sizes:
        # 100 MB three times rather than 30 MB once: a 30 MB run lasts about 0.06 s, and its MB/s on a
        # shared machine moved by 2x from run to run (for Tansu as much as for kbroker).
        return cls(messages=100_000, latency_rate=500, latency_seconds=3.0, repeat=3, partition_counts=(1, 100),
                   curve_messages=10_000, labels=run_labels(QUICK_PEERS))


PRODUCER_CONFIG = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    "compression.type": "none",
    "enable.idempotence": False,
}


def create_topic(bootstrap: str, topic: str, partitions: int, conf: dict | None = None, replicas: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **(conf or {})})
    futures = admin.create_topics([NewTopic(topic, partitions, replicas)], operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=60)
    # wait until metadata shows every partition with a leader
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no leaders after 30s")


POLL_EVERY = 1_000  # messages between two polls for delivery reports in `produce`


def produce(bootstrap: str, topic: str, messages: int, size: int, conf: dict | None = None) -> dict:
    """Send `messages` values of `size` random bytes (no key) and flush; time from the first send to
    flush() returning with every message acknowledged. `conf`: more client settings (security, for
    bench.security)."""
    from confluent_kafka import Producer

    payload = os.urandom(size)
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        errors.append(str(err))

    # The generator must outrun the broker: one delivery callback for the producer rather than one
    # handed to every produce() call, reports served every POLL_EVERY messages rather than after each
    # one (1.5-1.7 instead of 2.1-2.3 us of this loop per message, measured), and only failures
    # reported (1.62 instead of 1.87 us of generator CPU per message against a broker): a message
    # is delivered once flush() has nothing left and no report came.
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, **(conf or {}),
                         "on_delivery": on_delivery, "delivery.report.only.error": True})
    send, poll = producer.produce, producer.poll
    # connect and fetch metadata before timing
    producer.list_topics(topic, timeout=30)
    start = time.perf_counter()
    # POLL_EVERY messages per map() call, which runs the produce() calls from C: a Python loop around
    # them took 4-5% of the generator's core, which was the limit (93-99% busy against kbroker).
    sent = 0
    while sent < messages:
        n = min(POLL_EVERY, messages - sent)
        values = repeat(payload, n)
        try:
            deque(map(send, repeat(topic, n), values), 0)
            sent += n
        except BufferError:  # librdkafka's queue is full: the value map() took last was not sent
            sent += n - length_hint(values) - 1
            poll(0.005)  # serve delivery reports, then go on
        poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"produce: {left} undelivered, {len(errors)} errors, first: {errors[:1]}")
    delivered = messages
    return {"seconds": elapsed, "msgs_per_s": delivered / elapsed, "mb_per_s": delivered * size / elapsed / 1e6,
            "delivered": delivered}


def consume(bootstrap: str, topic: str, partitions: int, expected: int, conf: dict | None = None) -> dict:
    """Read every message back from the start of each partition that holds any (assign(), no group
    rebalance); time from assign() to the last message."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-consume-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        # fetch.max.bytes and max.partition.fetch.bytes stay librdkafka's defaults (50 MiB, 1 MiB, as the
        # Java client's), the sizes users run with; LARGE_FETCH is the figure with 10 MiB per partition
        "queued.max.messages.kbytes": 256 * 1024,
        # librdkafka's local queue holds 100,000 messages by default; a full queue stops its fetching
        # for fetch.queue.backoff.ms (1 s), which 200,000 small records hit (bench.transactions'
        # read_uncommitted did): that second would be the client's, not the broker's
        "queued.min.messages": 1_000_000,
        **(conf or {}),
    })
    try:
        consumer.list_topics(topic, timeout=30)
        # Only the partitions that hold messages (the sticky partitioner can leave one empty in a
        # short run): a fetch naming just an empty partition waits fetch.wait.max.ms (500 ms) for
        # data, as in Kafka, and that wait is not throughput.
        holding = [p for p in range(partitions)
                   if consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] > 0]
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in holding])
        got = nbytes = 0
        last = start
        idle_deadline = time.monotonic() + 60
        while got < expected and time.monotonic() < idle_deadline:
            # consume() returns once it has num_messages or at the timeout: never ask for more than is left
            batch = consumer.consume(num_messages=min(10_000, expected - got), timeout=1.0)
            # Every message's error and value length, read by map() in C rather than a Python loop:
            # against kbroker the generator's core was the limit (97% busy, broker 33%), and this loop
            # was a tenth of its work (2.6 us per message in all; the two brokers cost it the same).
            good = [m for m in batch if m.error() is None] if any(map(Message.error, batch)) else batch
            got += len(good)
            nbytes += sum(map(len, map(Message.value, good)))
            if batch:
                last = time.perf_counter()
                idle_deadline = time.monotonic() + 60
        elapsed = last - start
    finally:
        consumer.close()
    if got < expected:
        raise RuntimeError(f"consume: read {got} of {expected} messages")
    return {"seconds": elapsed, "msgs_per_s": got / elapsed, "mb_per_s": nbytes / elapsed / 1e6, "read": got}


# The consume figure again with 10 MiB per partition (the bench's setting before 2026-11-27): responses
# of tens of MB, which librdkafka reads into a fresh mmap'd buffer each, so its page faults join the figure
# (kbroker answers up to the limits as Kafka does; Tansu answered about 4-6 MB whatever they were).
LARGE_FETCH = {"max.partition.fetch.bytes": 10 * 1024 * 1024}


_STAMP = struct.Struct(">qB")  # send time (ns, CLOCK_REALTIME), flag: 1 = warm-up


def latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> dict:
    """A producer (linger.ms=0, acks=all) sends at a fixed rate; a consumer thread (assign(), reading
    from the start) takes receipt time minus the send time carried in the value. 0.5 s of warm-up
    messages are not counted."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 500})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, "linger.ms": 0})
    producer.list_topics(topic, timeout=30)
    pad = os.urandom(max(0, size - _STAMP.size))
    samples: list[int] = []
    measured = int(rate * seconds)
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            m = consumer.poll(0.2)  # poll() returns as soon as one message is there (consume() would batch)
            now = time.time_ns()
            if m is not None and m.error() is None:
                sent, warm = _STAMP.unpack_from(m.value())
                if not warm:
                    samples.append(now - sent)
            if len(samples) >= measured:
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    warm = int(rate * 0.5)
    start = time.perf_counter()
    for i in range(warm + measured):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, _STAMP.pack(time.time_ns(), 1 if i < warm else 0) + pad, partition=0,
                         on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(60)
    thread.join(timeout=60)
    done.set()
    thread.join(timeout=5)
    consumer.close()
    if errors:
        raise RuntimeError(f"latency: {len(errors)} delivery errors, first: {errors[0]}")
    if len(samples) < measured:
        raise RuntimeError(f"latency: received {len(samples)} of {measured} messages")
    ms = sorted(s / 1e6 for s in samples)
    return {"p50_ms": statistics.median(ms), "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
            "max_ms": ms[-1], "samples": len(ms)}


WARM_UP_MESSAGES = 1_000


def warm_up(bootstrap: str, topic: str, size: int, messages: int = WARM_UP_MESSAGES) -> None:
    """One small produce and consume on a topic of its own before any clock starts, on every broker
    alike (as `produce` fetches metadata before its clock): the first request of each API is one-off
    work (kbroker imports an API's handler and compiles its codec on first use, about 50-80 ms on
    this machine, which start-up figures count), not throughput, and at --quick sizes a timed run
    lasts only about 0.1 s."""
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, messages, size)
    consume(bootstrap, topic, 1, messages)


def _median_run(runs: list[dict]) -> dict:
    """The run with the median rate, carrying every run's MB/s in run order (`runs_mb_per_s`), so that
    the figure prints its spread."""
    median = sorted(runs, key=lambda r: r["msgs_per_s"])[len(runs) // 2]
    return {**median, "runs_mb_per_s": [r["mb_per_s"] for r in runs]} if len(runs) > 1 else median


def _run_one(handle: brokers.BrokerHandle, sizes: Sizes) -> dict:
    out: dict = {}
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-tp-{tag}"
    lat_topic = f"bench-lat-{tag}"
    create_topic(handle.bootstrap, lat_topic, 1)
    out["idle_rss"] = handle.rss()
    # Kafka's JVM compiles its produce and fetch paths under the first seconds of load: it warms up with
    # as many messages as a timed run holds (bench/brokers.py JVM_WARMUP_S says how much that matters)
    warm_up(handle.bootstrap, f"bench-warm-{tag}", sizes.size,
            sizes.messages if handle.name == "kafka" else WARM_UP_MESSAGES)
    produced: list[dict] = []
    consumed: list[dict] = []
    consumed_large: list[dict] = []
    # each repetition writes a fresh topic, then reads it back; the median run is reported
    for i in range(sizes.repeat):
        create_topic(handle.bootstrap, f"{topic}-{i}", sizes.partitions)
        try:
            with cores.CpuMeter(handle.pid) as meter:
                produced.append(produce(handle.bootstrap, f"{topic}-{i}", sizes.messages, sizes.size))
            produced[-1]["cpu"] = meter.use
        except Exception as e:  # a figure that fails is printed n/a with the reason
            out["produce"] = out["consume"] = NA(f"{type(e).__name__}: {e}")
            break
        try:
            with cores.CpuMeter(handle.pid) as meter:
                consumed.append(consume(handle.bootstrap, f"{topic}-{i}", sizes.partitions, sizes.messages))
            consumed[-1]["cpu"] = meter.use
            with cores.CpuMeter(handle.pid) as meter:
                consumed_large.append(consume(handle.bootstrap, f"{topic}-{i}", sizes.partitions, sizes.messages,
                                              LARGE_FETCH))
            consumed_large[-1]["cpu"] = meter.use
        except Exception as e:
            out["consume"] = out["consume_large"] = NA(f"{type(e).__name__}: {e}")
    if produced:
        out["rss_after_produce"] = handle.rss()
        out.setdefault("produce", _median_run(produced))
    if consumed:
        out.setdefault("consume", _median_run(consumed))
    if consumed_large:
        out.setdefault("consume_large", _median_run(consumed_large))
    try:
        out["latency"] = latency(handle.bootstrap, lat_topic, sizes.latency_rate, sizes.latency_seconds, sizes.size)
    except Exception as e:
        out["latency"] = NA(f"{type(e).__name__}: {e}")
    if handle.label in (KB_ALWAYS, PEER):
        out["by_partitions"] = {}
        for p in sizes.partition_counts:
            name = f"bench-parts-{p}-{tag}"
            try:
                create_topic(handle.bootstrap, name, p)
                prod = produce(handle.bootstrap, name, sizes.curve_messages, sizes.size)
                cons = consume(handle.bootstrap, name, p, sizes.curve_messages)
                out["by_partitions"][p] = (prod["mb_per_s"], cons["mb_per_s"])
            except Exception as e:
                out["by_partitions"][p] = NA(f"{type(e).__name__}: {e}")
    return out


CLUSTER_NODES = 3


def _run_cluster(handle: brokers.BrokerHandle, sizes: Sizes) -> dict:
    """The throughput runs through `kbroker serve --nodes 3` (issue 41): topics of replication factor 3,
    so each of the 3 partitions has its leader on another node (the producer and the consumer talk to
    all three) and acks=all checks the ISR against min.insync.replicas; median of the runs."""
    tag = uuid.uuid4().hex[:6]
    warm_up(handle.bootstrap, f"bench-warm-{tag}", sizes.size)
    produced: list[dict] = []
    consumed: list[dict] = []
    for i in range(sizes.repeat):
        topic = f"bench-nodes-{tag}-{i}"
        create_topic(handle.bootstrap, topic, sizes.partitions, replicas=CLUSTER_NODES)
        produced.append(produce(handle.bootstrap, topic, sizes.messages, sizes.size))
        consumed.append(consume(handle.bootstrap, topic, sizes.partitions, sizes.messages))
    return {"produce": _median_run(produced), "consume": _median_run(consumed)}


def run(sizes: Sizes, *, verbose: bool = True) -> list[Figure]:
    results: dict[str, dict | NA] = {}
    for label in sizes.labels:
        if verbose:
            print(f"  data_path: {label} ...", flush=True)
        try:
            handle = brokers.start_label(label)
        except brokers.Unavailable as e:
            results[label] = NA(str(e))
            continue
        try:
            results[label] = _run_one(handle, sizes)
        except Exception as e:
            results[label] = NA(f"{type(e).__name__}: {e}")
        finally:
            handle.stop()
    cluster: dict | NA | None = None
    if sizes.cluster and KB_ALWAYS in sizes.labels:
        if verbose:
            print(f"  data_path: {KB_ALWAYS}, --nodes {CLUSTER_NODES} ...", flush=True)
        try:
            handle = brokers.start_kbroker(flush="always", nodes=CLUSTER_NODES)
        except Exception as e:  # noqa: BLE001 - the figure is printed n/a with the reason
            cluster = NA(f"{type(e).__name__}: {e}")
        else:
            try:
                cluster = _run_cluster(handle, sizes)
            except Exception as e:  # noqa: BLE001
                cluster = NA(f"{type(e).__name__}: {e}")
            finally:
                handle.stop()
    return figures(results, sizes) + cluster_figures(cluster, sizes)


def cluster_figures(cluster: dict | NA | None, s: Sizes) -> list[Figure]:
    """The 3-node figures, in kbroker's --flush always column, under the single node's (issue 41)."""
    if cluster is None:
        return []
    how = (f"as the {{what}} throughput above (kbroker --flush always, {s.messages:,} messages of {s.size} bytes, "
           f"{s.partitions} partitions, median of {s.repeat} runs, each on a fresh topic) but through "
           f"`kbroker serve --nodes {CLUSTER_NODES}`: the topics have {CLUSTER_NODES} replicas (each partition led "
           f"by another node, the clients bootstrapped from all three), acks=all checking the in-sync replicas")
    out = []
    for what in ("produce", "consume"):
        f = Figure("data_path", f"{what} throughput, {CLUSTER_NODES} nodes (RF {CLUSTER_NODES})",
                   how.format(what=what), "MB/s, 10^6 bytes of values", fmt=",.1f")
        if isinstance(cluster, NA):
            f.values[KB_ALWAYS] = cluster
        else:
            v = cluster[what]
            f.values[KB_ALWAYS] = v["mb_per_s"]
            if "runs_mb_per_s" in v:
                f.notes[KB_ALWAYS] = (f"median of {len(v['runs_mb_per_s'])} runs: "
                                      + " / ".join(f"{x:,.1f}" for x in v["runs_mb_per_s"]) + " MB/s")
        out.append(f)
    return out


def _parts(p: int) -> str:
    return f"{p:,} partition{'' if p == 1 else 's'}"


def curves(figs: list[Figure], s: Sizes) -> list:
    """Produce and consume MB/s by partition count (issue 17's cost curve), from the figures measured."""
    from kbroker.bench.curves import from_figures

    note = (f"{s.curve_messages:,} messages of {s.size} bytes over the partitions (no key), one confluent-kafka "
            f"producer (acks=all) then one consumer with assign(); a fresh topic per count")
    return [from_figures(figs, f"{what}_mb_s_by_partitions", f"{what} MB/s by partitions", "partitions", "MB/s",
                         {p: f"{what} throughput, {_parts(p)}" for p in s.partition_counts}, note=note)
            for what in ("produce", "consume")]


def figures(results: dict[str, dict | NA], s: Sizes) -> list[Figure]:
    msg = f"{s.size}-byte values, no key, no compression"
    rep = f"median of {s.repeat} runs, each on a fresh topic" if s.repeat > 1 else "one run"
    warm = (f"after a warm-up on another topic ({WARM_UP_MESSAGES:,} messages produced and consumed; Kafka: "
            f"{s.messages:,}, for its JIT compiler)")
    prod_how = (f"{rep} {warm}: {s.messages:,} messages of {msg}, {s.partitions} partitions, one confluent-kafka producer "
                f"(acks=all, linger.ms=5, batch.size=1MB, not idempotent); first send to the last acknowledgement; "
                f"kbroker --flush always and Kafka with flush.messages=1 acknowledge after an fsync, kbroker --flush "
                f"never and Kafka at its default flush (no fsync per write) after the page cache, Tansu after memory")
    cons_how = (f"{rep}: the {s.messages:,} messages just produced read back by one confluent-kafka consumer with assign() "
                f"and librdkafka's default fetch sizes (1 MiB per partition, 50 MiB per response) from offset 0 of the {s.partitions} partitions (those holding messages; no group rebalance) {warm}; assign() to last message")
    large_how = (f"as the consume figure above, read a second time in each run with max.partition.fetch.bytes "
                 f"10 MiB (librdkafka's default is 1 MiB): responses of tens of MB, whose fresh buffers cost the "
                 f"consumer page faults")
    lat_how = (f"{s.latency_rate:,} msgs/s for {s.latency_seconds:g} s ({int(s.latency_rate * s.latency_seconds):,} "
               f"samples after 0.5 s warm-up) of {msg}, 1 partition, producer linger.ms=0 acks=all, consumer "
               f"thread in the same process long-polling (fetch.wait.max.ms=500, fetch.min.bytes=1); receipt time minus send time in the value")
    MB = "MB/s, 10^6 bytes of values"
    specs = [
        ("produce throughput", prod_how, MB, True, ",.1f", "produce", "mb_per_s"),
        ("produce throughput", prod_how, "msgs/s", True, ",.0f", "produce", "msgs_per_s"),
        ("consume throughput", cons_how, MB, True, ",.1f", "consume", "mb_per_s"),
        ("consume throughput", cons_how, "msgs/s", True, ",.0f", "consume", "msgs_per_s"),
        ("consume throughput, 10 MiB per partition", large_how, MB, True, ",.1f", "consume_large", "mb_per_s"),
        ("end-to-end latency p50", lat_how, "ms", False, ",.2f", "latency", "p50_ms"),
        ("end-to-end latency p99", lat_how, "ms", False, ",.2f", "latency", "p99_ms"),
        ("broker RSS after producing", f"resident set size of the broker process after the produce runs above "
         f"({s.repeat * s.messages * s.size / 1e6:,.0f} MB of values held: kbroker in segment files, so in the "
         f"page cache rather than its RSS; Kafka too, its RSS a JVM with -Xmx1G -Xms1G; Tansu in its heap)",
         "MiB", False, ",.1f", "rss_after_produce", None),
    ]
    out = []
    for name, how, unit, hib, fmt, key, sub in specs:
        f = Figure("data_path", name, how, unit, higher_is_better=hib, fmt=fmt)
        for label in LABELS:
            r = results.get(label)
            if r is None:
                continue
            if isinstance(r, NA):
                f.values[label] = r
                continue
            v = r.get(key)
            if v is None:
                f.values[label] = NA("not measured: the produce run failed")
            elif isinstance(v, NA):
                f.values[label] = v
            elif sub is None:
                f.values[label] = v / 2 ** 20
            else:
                f.values[label] = v[sub]
                notes = []
                if "cpu" in v:
                    notes.append(f"{v['cpu']} (the generator here: librdkafka's threads and this process)")
                if sub == "mb_per_s" and "runs_mb_per_s" in v:
                    notes.append(f"median of {len(v['runs_mb_per_s'])} runs: "
                                 + " / ".join(f"{x:,.1f}" for x in v["runs_mb_per_s"]) + " MB/s")
                if notes:
                    f.notes[label] = "; ".join(notes)
        out.append(f)
    for i, what in enumerate(("produce", "consume")):
        for p in s.partition_counts:
            f = Figure("data_path", f"{what} throughput, {_parts(p)}",
                       f"the cost curve: {s.curve_messages:,} messages of {msg} over {_parts(p)}, one "
                       f"confluent-kafka {'producer (acks=all)' if i == 0 else 'consumer (assign())'}, fresh topic",
                       "MB/s", fmt=",.1f")
            for label in (KB_ALWAYS, PEER):
                r = results.get(label)
                if r is None:
                    continue
                v = r if isinstance(r, NA) else r.get("by_partitions", {}).get(p)
                if v is not None:
                    f.values[label] = v if isinstance(v, NA) else v[i]
            out.append(f)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Sizes()
    parser.add_argument("--quick", action="store_true", help="small sizes (as `python -m bench --quick`)")
    parser.add_argument("--messages", type=int, help=f"messages for the throughput runs (default {d.messages:,})")
    parser.add_argument("--size", type=int, help=f"value size in bytes (default {d.size})")
    parser.add_argument("--partitions", type=int, help=f"partitions of the throughput topic (default {d.partitions})")
    parser.add_argument("--repeat", type=int, help=f"throughput runs per broker, median reported "
                                                   f"(default {d.repeat})")
    parser.add_argument("--latency-rate", type=int, help=f"messages per second in the latency run "
                                                         f"(default {d.latency_rate})")
    parser.add_argument("--latency-seconds", type=float, help=f"length of the latency run (default "
                                                              f"{d.latency_seconds:g})")
    parser.add_argument("--no-cluster", action="store_true", help="leave out the runs through --nodes 3")
    parser.add_argument("--peers", type=peers_arg, help=f"comma-separated peers to measure beside kbroker "
                                                        f"(default {','.join(FULL_PEERS)}; --quick: "
                                                        f"{','.join(QUICK_PEERS)})")
    args = parser.parse_args(argv)
    from kbroker.bench import cores

    cores.pin_generator()
    cores.raise_fd_limit()
    sizes = Sizes.quick() if args.quick else Sizes()
    for name in ("repeat", "messages", "size", "partitions", "latency_rate", "latency_seconds"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    if args.peers is not None:
        sizes.labels = run_labels(args.peers)
    sizes.cluster = not args.no_cluster
    print(f"data_path: kbroker beside {brokers.peers_line(sizes.labels)}; {machine_note()}")
    figs = run(sizes)
    print_figures(figs, sizes.labels)
    from kbroker.bench.curves import report

    print()
    report(curves(figs, sizes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
