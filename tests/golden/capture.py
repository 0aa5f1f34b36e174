"""Capture request frames from real clients, to keep as golden bytes.

    python tests/golden/capture.py [kafka-python,librdkafka,sarama,kafkajs]

Starts a kbroker that advertises a recording TCP proxy in front of it (so clients reach the group
coordinator through the proxy too), runs the chosen clients through it and writes each client's
first request of every wanted API to `tests/golden/<client>-<api>-v<version>.hex`: for kafka-python
and confluent-kafka ApiVersions, Metadata and JoinGroup; for sarama (tests/clients/sarama, a produce and a
group consume; the sarama-*.hex kept here are sarama 1.22's, today's IBM/sarama sends Kafka 0.10.2's
versions there) and kafkajs (tests/clients/kafkajs, a produce, a group consume and
its admin calls) every API they send.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from pathlib import Path

HERE = Path(__file__).parent
WANTED = {18: "api_versions", 3: "metadata", 11: "join_group"}
ALL_APIS = {0: "produce", 1: "fetch", 2: "list_offsets", 3: "metadata", 8: "offset_commit", 9: "offset_fetch",
            10: "find_coordinator", 11: "join_group", 12: "heartbeat", 13: "leave_group", 14: "sync_group",
            15: "describe_groups", 18: "api_versions", 21: "delete_records"}
EVERY_API_CLIENTS = ("sarama", "kafkajs")
REPO = HERE.parent.parent


class Recorder:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.frames: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.upstream)

        async def client_to_broker() -> None:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
                self.frames.append(body)
                up_w.write(head + body)
                await up_w.drain()

        async def broker_to_client() -> None:
            while True:
                data = await up_r.read(65536)
                if not data:
                    break
                writer.write(data)
                await writer.drain()

        try:
            await asyncio.gather(client_to_broker(), broker_to_client())
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            up_w.close()


def run_go_and_node_clients(bootstrap: str, clients: list[str]) -> None:
    import os
    import subprocess

    env = dict(os.environ)
    if "sarama" in clients:
        from kbroker.tests.reference.client_matrix import go_binary

        binary = go_binary("sarama")  # IBM/sarama at Kafka 0.10.2's versions (tests/clients/sarama/main.go)
        sarama_env = dict(env, KBROKER_TEST_CLIENT_ID="golden-sarama")
        subprocess.run([str(binary), "produce", bootstrap, "golden-topic", "3", "m"], env=sarama_env, check=True)
        subprocess.run([str(binary), "consume", bootstrap, "golden-topic", "golden-sarama-group", "3"], env=sarama_env,
                       check=True)
    if "kafkajs" in clients:
        node_env = dict(env, KBROKER_TEST_CLIENT_ID="golden-kafkajs")
        cwd = REPO / "tests/clients/kafkajs"
        for args in (["produce", bootstrap, "golden-kjs", "3"], ["consume", bootstrap, "golden-kjs", "golden-kjs-group", "3"],
                     ["admin", bootstrap, "golden-kjs", "golden-kjs-group", "1"]):
            subprocess.run(["node", "run.js", *args], cwd=cwd, env=node_env, check=True)


def run_clients(bootstrap: str, clients: list[str]) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    run_go_and_node_clients(bootstrap, clients)
    if "kafka-python" in clients:
        c = KafkaConsumer("golden-topic", bootstrap_servers=bootstrap, group_id="golden-group",
                          client_id="golden-kafka-python", consumer_timeout_ms=3000)
        list(c)
        c.close()
    if "librdkafka" not in clients:
        return
    cc = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-group-2", "client.id": "golden-librdkafka"})
    cc.subscribe(["golden-topic"])
    for _ in range(6):
        cc.poll(0.5)
    cc.close()


async def main(clients: list[str], out: Path = HERE) -> list[Path]:
    """Capture the chosen clients' frames into `out`; returns the files written."""
    import tempfile

    from kbroker.tests.integration.broker_process import BrokerProcess, free_port

    proxy_port = free_port()
    broker = BrokerProcess(Path(tempfile.mkdtemp()) / "data", "--advertised-listener", f"127.0.0.1:{proxy_port}",
                           "--group-initial-rebalance-delay-ms", "0")
    rec = Recorder((broker.host, broker.port))
    server = await asyncio.start_server(rec.handle, "127.0.0.1", proxy_port)
    proxy = f"127.0.0.1:{proxy_port}"
    thread = threading.Thread(target=run_clients, args=(proxy, clients))
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.2)
    server.close()
    broker.stop()
    seen: set[tuple[str, int]] = set()
    written: list[Path] = []
    for frame in rec.frames:
        api, version, _ = struct.unpack_from(">hhi", frame)
        n = struct.unpack_from(">h", frame, 8)[0]
        client_id = frame[10:10 + n].decode()
        client = next((c for c in EVERY_API_CLIENTS if c in client_id), None) or (
            "kafka-python" if "python" in client_id else "librdkafka")
        wanted = ALL_APIS if client in EVERY_API_CLIENTS else WANTED
        if client in clients and api in wanted and (client, api) not in seen:
            seen.add((client, api))
            path = out / f"{client}-{wanted[api]}-v{version}.hex"
            path.write_text(frame.hex() + "\n")
            written.append(path)
            print("wrote", path.name)
    return written


if __name__ == "__main__":
    import sys

    asyncio.run(main((sys.argv[1] if len(sys.argv) > 1 else "kafka-python,librdkafka,sarama,kafkajs").split(",")))
