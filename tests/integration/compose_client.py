"""`python -m kbroker.tests.integration.compose_client BOOTSTRAP TOPIC GROUP [produce|consume N]`: a real
client (confluent-kafka) run where a compose file's users run theirs (tests/integration/compose_netns.py).

It asks Metadata which brokers it is told of, then produces N records to TOPIC or consumes N with
group GROUP (committing them), and prints one JSON line: the brokers as (host, port), what it did.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


def main(bootstrap: str, topic: str, group: str, action: str, count: int) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = sorted((b.host, b.port) for b in admin.list_topics(timeout=30).brokers.values())
    report: dict = {"brokers": brokers}
    if action == "produce":
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=f"{bootstrap} {i}".encode())
        assert producer.flush(60) == 0, "records left unsent"
        report["produced"] = count
    else:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        values = []
        for _ in range(600):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
                if len(values) == count:
                    break
        consumer.commit(asynchronous=False)
        report["consumed"] = values
        report["coordinator"] = consumer.list_topics(timeout=10).orig_broker_name
        consumer.close()
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))))
