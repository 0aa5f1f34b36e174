"""Produce and consume MB/s over SASL_SSL (SCRAM-SHA-512 over TLS) beside PLAINTEXT, one broker.

    python -m bench.security [--messages N] [--size BYTES] [--repeat R]

One `kbroker serve --dev-security DIR` (flush always) serves both listeners; the figures use the
client configs it writes, so the SASL_SSL run is exactly what a team's CI would use. Each figure is
the median of `repeat` runs of data_path's produce and consume (one confluent-kafka producer, acks=all,
then one consumer reading everything back with assign()), on a fresh topic per run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kbroker.bench import brokers, data_path

PROTOCOLS = ("PLAINTEXT", "SASL_SSL")


def _properties(path: Path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def run(messages: int, size: int, partitions: int = 3, repeat: int = 3) -> dict[str, dict]:
    dev = Path(tempfile.mkdtemp(prefix="kbroker-bench-dev-"))
    handle = brokers.start_kbroker(extra=("--dev-security", str(dev)))
    try:
        deadline = time.monotonic() + 30
        while not (dev / "sasl_ssl.properties").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        results: dict[str, dict] = {}
        for protocol in PROTOCOLS:
            conf = _properties(dev / f"{protocol.lower()}.properties")
            bootstrap = conf.pop("bootstrap.servers")
            prod, cons = [], []
            for _ in range(repeat):
                topic = f"bench-sec-{protocol.lower()}-{uuid.uuid4().hex[:6]}"
                data_path.create_topic(bootstrap, topic, partitions, conf)
                prod.append(data_path.produce(bootstrap, topic, messages, size, conf)["mb_per_s"])
                cons.append(data_path.consume(bootstrap, topic, partitions, messages, conf)["mb_per_s"])
            results[protocol] = {"produce_mb_s": statistics.median(prod), "consume_mb_s": statistics.median(cons)}
        return results
    finally:
        handle.stop()


def report(messages: int, size: int, repeat: int) -> dict[str, dict]:
    print(f"{messages:,} messages of {size} B, 3 partitions, one confluent-kafka producer (acks=all) then one "
          f"consumer (assign()), median of {repeat}; one kbroker --dev-security (flush always); SASL_SSL is "
          "SCRAM-SHA-512 over TLS 1.3")
    results = run(messages, size, repeat=repeat)
    for protocol, r in results.items():
        print(f"  {protocol:<10} produce {r['produce_mb_s']:7.1f} MB/s   consume {r['consume_mb_s']:7.1f} MB/s")
    plain, secure = results["PLAINTEXT"], results["SASL_SSL"]
    print(f"  SASL_SSL / PLAINTEXT: produce {secure['produce_mb_s'] / plain['produce_mb_s']:.2f}x, "
          f"consume {secure['consume_mb_s'] / plain['consume_mb_s']:.2f}x")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.security", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    report(args.messages, args.size, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
