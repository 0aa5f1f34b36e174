"""Binding a listener: an address literal is bound as it is (no resolver, no idna codec), a name is
resolved first, and what cannot be bound is a StartupError naming the option."""

from __future__ import annotations

import socket

import pytest

from kbroker.broker.listeners import Endpoint
from kbroker.broker.startup import StartupError, _literal_family, bind


def test_literals_and_names() -> None:
    assert _literal_family("127.0.0.1") == socket.AF_INET
    assert _literal_family("::1") == socket.AF_INET6
    assert _literal_family("localhost") is None
    assert _literal_family("256.1.1.1") is None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_bind_an_address_or_a_name(host: str) -> None:
    sock = bind(Endpoint("PLAINTEXT", host, 0, "PLAINTEXT"), "--listeners")
    try:
        assert sock.getsockname()[1] > 0
    finally:
        sock.close()


def test_bind_an_ipv6_literal() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        sock = bind(Endpoint("PLAINTEXT", "::1", 0, "PLAINTEXT"), "--listeners")
    except StartupError as e:
        pytest.skip(f"::1 not bindable here: {e}")
    assert sock.family == socket.AF_INET6
    sock.close()


def test_an_address_of_another_machine_is_a_startup_error() -> None:
    with pytest.raises(StartupError, match="--listeners: .*not an address of this machine"):
        bind(Endpoint("PLAINTEXT", "192.0.2.1", 9092, "PLAINTEXT"), "--listeners")
    with pytest.raises(StartupError, match="cannot resolve host"):
        bind(Endpoint("PLAINTEXT", "no-such-host.invalid", 9092, "PLAINTEXT"), "--listeners")
