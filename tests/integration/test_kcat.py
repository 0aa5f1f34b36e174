"""kcat (Debian's package, librdkafka inside) against kbroker: metadata, produce, consume, and
reading `__consumer_offsets` as lag tools do. `make test` installs kcat when it runs as root."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess

pytestmark = [
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make system-deps)"),
    pytest.mark.timeout(120),
]


def kcat(broker, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=stdin, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("kcat") / "data", "--num-partitions", "3",
                       "--group-initial-rebalance-delay-ms", "0") as b:
        yield b


def test_kcat_lists_metadata(broker) -> None:
    listing = kcat(broker, "-L")
    assert f"broker 1 at {broker.bootstrap} (controller)" in listing
    assert 'topic "__consumer_offsets" with 50 partitions' in listing


def test_kcat_produces_and_consumes(broker) -> None:
    lines = [f"key-{i}:value-{i}" for i in range(200)]
    kcat(broker, "-P", "-t", "kcat-topic", "-K:", "-z", "snappy", stdin="\n".join(lines) + "\n")
    listing = kcat(broker, "-L", "-t", "kcat-topic")
    assert 'topic "kcat-topic" with 3 partitions' in listing
    consumed = kcat(broker, "-C", "-t", "kcat-topic", "-e", "-f", "%k:%s\n").splitlines()
    assert sorted(consumed) == sorted(lines)


def test_kcat_reads_committed_offsets_from_consumer_offsets(broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    kcat(broker, "-P", "-t", "kcat-lag", "-p", "0", stdin="a\nb\nc\n")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcat-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("kcat-lag", 0, 2)], asynchronous=False)
    c.close()
    # Keys and values are Kafka's binary formats; a lag tool decodes them, here the group name is enough.
    records = kcat(broker, "-C", "-t", "__consumer_offsets", "-e", "-f", "%k\n", "-o", "beginning")
    assert "kcat-group" in records
