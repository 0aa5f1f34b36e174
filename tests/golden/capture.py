"""Capture request frames from real clients, to keep as golden bytes.

    python tests/golden/capture.py

Starts a kbroker that advertises a recording TCP proxy in front of it (so clients reach the group
coordinator through the proxy too), runs kafka-python and confluent-kafka through it (ApiVersions,
Metadata, and a consumer-group join), and writes each client's first request of every API to
`tests/golden/<client>-<api>-v<version>.hex`.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from pathlib import Path

HERE = Path(__file__).parent
WANTED = {18: "api_versions", 3: "metadata", 11: "join_group"}


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


def run_clients(bootstrap: str) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    c = KafkaConsumer("golden-topic", bootstrap_servers=bootstrap, group_id="golden-group",
                      client_id="golden-kafka-python", consumer_timeout_ms=3000)
    list(c)
    c.close()
    cc = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-group-2", "client.id": "golden-librdkafka"})
    cc.subscribe(["golden-topic"])
    for _ in range(6):
        cc.poll(0.5)
    cc.close()


async def main() -> None:
    import tempfile

    from kbroker.tests.integration.broker_process import BrokerProcess, free_port

    proxy_port = free_port()
    broker = BrokerProcess(Path(tempfile.mkdtemp()) / "data", "--advertised-listener", f"127.0.0.1:{proxy_port}",
                           "--group-initial-rebalance-delay-ms", "0")
    rec = Recorder((broker.host, broker.port))
    server = await asyncio.start_server(rec.handle, "127.0.0.1", proxy_port)
    proxy = f"127.0.0.1:{proxy_port}"
    thread = threading.Thread(target=run_clients, args=(proxy,))
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.2)
    server.close()
    broker.stop()
    seen: set[tuple[str, int]] = set()
    for frame in rec.frames:
        api, version, _ = struct.unpack_from(">hhi", frame)
        n = struct.unpack_from(">h", frame, 8)[0]
        client_id = frame[10:10 + n].decode()
        client = "kafka-python" if "python" in client_id else "librdkafka"
        if api in WANTED and (client, api) not in seen:
            seen.add((client, api))
            path = HERE / f"{client}-{WANTED[api]}-v{version}.hex"
            path.write_text(frame.hex() + "\n")
            print("wrote", path.name)


if __name__ == "__main__":
    asyncio.run(main())
