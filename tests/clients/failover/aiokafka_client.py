"""aiokafka in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an idempotent
producer (acks=all) and a committing consumer group on one topic until a "stop" line on stdin, then the
producer flushes and the consumer reads on until it has every acknowledged record; one line per event on
stdout (A acked, C consumed, E error, P producer done, DONE), as every failover workload prints them.

    python tests/clients/failover/aiokafka_client.py BOOTSTRAP TOPIC GROUP
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(bootstrap: str, topic: str, group: str) -> None:
    loop = asyncio.get_running_loop()
    stop, produced = asyncio.Event(), asyncio.Event()
    acked: set[str] = set()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        loop.call_soon_threadsafe(stop.set)

    loop.run_in_executor(None, watch_stdin)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                                    request_timeout_ms=30000)
        await producer.start()
        pending: set[asyncio.Future] = set()
        i = 0
        while not stop.is_set():
            value = "r%06d" % i
            try:
                future = await producer.send(topic, key=str(i % 16).encode(), value=value.encode())
            except Exception as e:  # noqa: BLE001 - reported as the application would see it
                say(f"E produce: {type(e).__name__}: {e}")
                await asyncio.sleep(0.1)
                continue

            def done(f: asyncio.Future, value: str = value) -> None:
                if f.exception() is None:
                    acked.add(value)
                    say(f"A {value}")
                else:
                    say(f"E produce: {type(f.exception()).__name__}: {f.exception()}")

            future.add_done_callback(done)
            pending.add(future)
            future.add_done_callback(pending.discard)
            i += 1
            await asyncio.sleep(0.002)
        await producer.flush()
        await asyncio.gather(*pending, return_exceptions=True)
        await producer.stop()
        produced.set()
        say("P")

    producing = asyncio.create_task(produce())
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    await consumer.start()
    consumed: set[str] = set()
    idle_since = time.monotonic()
    while not (produced.is_set() and acked <= consumed):
        try:
            batches = await consumer.getmany(timeout_ms=200)
        except Exception as e:  # noqa: BLE001
            say(f"E consume: {type(e).__name__}: {e}")
            continue
        if not any(batches.values()):
            if produced.is_set() and time.monotonic() - idle_since > 20:
                break
            continue
        idle_since = time.monotonic()
        for records in batches.values():
            for r in records:
                consumed.add(r.value.decode())
                say(f"C {r.value.decode()}")
        try:
            await consumer.commit()
        except Exception as e:  # noqa: BLE001
            say(f"E commit: {type(e).__name__}: {e}")
    await consumer.stop()
    await producing
    say("DONE")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(*sys.argv[1:4]))
