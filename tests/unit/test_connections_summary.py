"""The minute's connections summary (broker/operations/observe.py): one info line instead of a debug line per
connection, only for a minute in which something happened."""

from __future__ import annotations

from kbroker.broker.operations.observe import ConnectionSummary, Observations


def test_a_summary_counts_the_interval_and_starts_the_next() -> None:
    obs = Observations()
    assert obs.summary.take({"PLAINTEXT": 0}) is None  # a quiet minute: no line
    for ip in ["10.0.0.1"] * 3 + ["10.0.0.2"]:
        obs.connection_opened("PLAINTEXT", ip)
    obs.connection_opened("INTERNAL", "10.0.0.3")
    obs.connection_closed()
    obs.connection_closed()
    line = obs.summary.take({"PLAINTEXT": 2, "INTERNAL": 1})
    assert line == {"opened": 5, "closed": 2, "open": 3, "open_by_listener": {"PLAINTEXT": 2, "INTERNAL": 1},
                    "opened_by_listener": {"PLAINTEXT": 4, "INTERNAL": 1},
                    "top_peers": {"10.0.0.1": 3, "10.0.0.2": 1, "10.0.0.3": 1}, "peers": 3}
    assert (obs.connections_opened, obs.connections_closed) == (5, 2)  # the metrics' counters go on
    assert obs.summary.take({"PLAINTEXT": 2, "INTERNAL": 1}) is None
    obs.connection_closed()
    assert obs.summary.take({"PLAINTEXT": 1})["closed"] == 1


def test_the_addresses_counted_are_bounded() -> None:
    summary = ConnectionSummary()
    for i in range(ConnectionSummary.MAX_PEERS + 50):
        summary.opened("PLAINTEXT", f"10.1.{i // 256}.{i % 256}")
    line = summary.take({})
    assert line["peers"] == ConnectionSummary.MAX_PEERS + 1 and line["opened"] == ConnectionSummary.MAX_PEERS + 50
    assert len(line["top_peers"]) == ConnectionSummary.TOP
