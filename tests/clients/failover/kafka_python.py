"""kafka-python in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an idempotent
producer (acks=all) and a committing consumer group on one topic until a "stop" line on stdin, then the
producer flushes and the consumer reads on until it has every acknowledged record; one line per event on
stdout (A acked, C consumed, E error, P producer done, DONE), as every failover workload prints them.

    python tests/clients/failover/kafka_python.py BOOTSTRAP TOPIC GROUP
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer

_lock = threading.Lock()


def say(line: str) -> None:
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if os.environ.get("KBROKER_KAFKA_PYTHON_LOG"):  # the group's and the metadata's steps, to look into a run
        for name in ("kafka.coordinator", "kafka.cluster"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    bootstrap, topic, group = sys.argv[1:4]
    servers = bootstrap.split(",")
    stop, produced = threading.Event(), threading.Event()
    acked: set[str] = set()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=servers, enable_idempotence=True, acks="all", linger_ms=5,
                                 delivery_timeout_ms=120000)
        i = 0
        while not stop.is_set():
            value = "r%06d" % i

            def ok(_md, value=value) -> None:
                acked.add(value)
                say(f"A {value}")

            def failed(e, value=value) -> None:
                say(f"E produce: {type(e).__name__}: {e}")

            producer.send(topic, key=str(i % 16).encode(), value=value.encode()).add_callback(ok).add_errback(failed)
            i += 1
            time.sleep(0.002)
        producer.flush(120)
        producer.close(30)
        produced.set()
        say("P")

    producing = threading.Thread(target=produce)
    producing.start()
    consumer = KafkaConsumer(topic, bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    # The topic's partitions are known before the first poll joins the group. kafka-python 3.0.12 can otherwise
    # be stuck for good: a join made before the topic's metadata arrived assigns nothing, the metadata that
    # follows makes the leader rejoin (ConsumerCoordinator.need_rejoin: assignment snapshot != metadata
    # snapshot), and when poll()'s timeout ends while that JoinGroup/SyncGroup is in flight, the assignment
    # it makes equalises the snapshots, need_rejoin() turns False and no later poll() finishes the join
    # (BaseCoordinator.join_group_async: no assignment, heartbeats left disabled; the broker expires the
    # member, which never learns it). Kafka's coordinator answers the same requests the same way.
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    consumed: set[str] = set()
    idle_since = time.monotonic()
    while not (produced.is_set() and acked <= consumed):
        try:
            batches = consumer.poll(200)
        except Exception as e:  # noqa: BLE001 - reported, then polled again as an application would
            say(f"E consume: {type(e).__name__}: {e}")
            continue
        if not batches:
            if produced.is_set() and time.monotonic() - idle_since > 20:
                break
            continue
        idle_since = time.monotonic()
        for records in batches.values():
            for r in records:
                consumed.add(r.value.decode())
                say(f"C {r.value.decode()}")
        try:
            consumer.commit()
        except Exception as e:  # noqa: BLE001
            say(f"E commit: {type(e).__name__}: {e}")
    consumer.close()
    producing.join()
    say("DONE")


if __name__ == "__main__":
    main()
