"""/metrics for share groups (KIP-932): each group's records in flight by state, and its acquisitions,
redeliveries, archived records and expired locks, scraped from a real broker process."""

from __future__ import annotations

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.test_share_fetch_wire import Member, acquired, produce, setup


def test_share_metrics_per_group(tmp_path):
    """/metrics shows each share group's records in flight by state and its acquisitions,
    redeliveries, archived records and expired locks."""
    import re
    import urllib.request

    from kbroker.tests.integration.broker_process import free_port

    port = free_port()
    with BrokerProcess(tmp_path / "data", "--num-partitions", "1", "--metrics-listen", f"127.0.0.1:{port}",
                       "--group-share-record-lock-duration-ms", "1000") as broker:
        topic, topic_id, group = setup(broker, 0)
        a = Member(broker, group, topic, topic_id)
        a.fetch()
        produce(broker, topic, 4)
        assert acquired(a.fetch(max_wait_ms=5_000, max_records=4)) == [(0, 3, 1)]
        a.acknowledge([(0, 1, [1, 3])])  # 0 accepted, 1 rejected (archived); 2-3 left to expire
        got: list = []
        while not got:  # the long poll ends when the locks of 2-3 expire (1 s)
            got = acquired(a.fetch(max_wait_ms=5_000))
        assert got == [(2, 3, 2)]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()

        def value(name: str, **labels: str) -> float:
            wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
            found = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
            assert found, (name, labels, [line for line in text.splitlines() if "share" in line])
            return float(found.group(1))

        assert value("kbroker_share_acquired_records_total", group=group) == 6
        assert value("kbroker_share_archived_records_total", group=group) == 1
        assert value("kbroker_share_lock_expiries_total", group=group) == 2
        assert value("kbroker_share_redelivered_records_total", group=group) == 2
        assert value("kbroker_share_in_flight_records", group=group, state="acquired") == 2
