"""The test harness's brokers on ports another process takes between free_port's look and the broker's
bind (other test sessions share the machine's port blocks): the start moves to another port instead of
failing the test (a loaded run's reference test errored at set-up on "port ... is already in use")."""

from __future__ import annotations

import socket

import pytest

from kbroker.tests.integration import broker_process
from kbroker.tests.integration.broker_process import BrokerProcess, PortTaken, free_port
from kbroker.tests.reference import pair


@pytest.fixture
def taken(monkeypatch):
    """A port held by another socket, handed out by the next free_port call (as when another process
    binds it after the look); later calls pick free ports as before."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", free_port()))
    holder.listen()
    port = holder.getsockname()[1]
    handed: list[int] = []

    def first_the_taken_one(host: str = "127.0.0.1") -> int:
        handed.append(port if not handed else free_port(host))
        return handed[-1]

    monkeypatch.setattr(broker_process, "free_port", first_the_taken_one)
    monkeypatch.setattr(pair, "free_port", first_the_taken_one)
    try:
        yield port, handed
    finally:
        holder.close()


def test_a_broker_whose_port_was_taken_starts_on_another(tmp_path, taken):
    port, handed = taken
    with BrokerProcess(tmp_path / "data") as broker:
        assert handed[0] == port and broker.port == handed[-1] != port
        assert broker.events("broker_started")


def test_the_reference_pairs_kbroker_whose_port_was_taken_starts_on_another(tmp_path, taken):
    port, handed = taken
    broker = pair.kbroker_like_kafka(tmp_path / "data")
    try:
        assert handed[0] == port and broker.port == handed[-1] != port
    finally:
        broker.stop()


def test_a_restart_keeps_its_port_and_says_it_is_taken(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        port = broker.port
        broker.stop()
        holder = socket.socket()
        try:  # (another session may have taken it first: the start is refused all the same)
            holder.bind(("127.0.0.1", port))
            holder.listen()
        except OSError:
            pass
        try:
            with pytest.raises(PortTaken):
                broker.start()
        finally:
            holder.close()
