"""Interim TLS/SASL listeners beside the one `--listen` listener, until named listeners (issue 9)
reach this branch: `--security-listeners SASL_SSL://127.0.0.1:9094,SSL://127.0.0.1:9093`.

Each entry is PROTOCOL://HOST:PORT and gets its own KafkaServer. Kafka tells a client the address of
the listener it came in on; the handlers read the advertised address from `broker.config`, so each
extra server hands its requests a view of the broker whose config advertises that server's address.
Once `listeners`/`listener.security.protocol.map` are merged, this module goes away: the broker
passes `Security.for_listener(protocol, name)` to each listener's server instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kbroker.broker.config import parse_host_port
from kbroker.broker.security.service import SECURITY_PROTOCOLS


@dataclass(frozen=True, slots=True)
class ExtraListener:
    protocol: str
    host: str
    port: int


def parse(text: str) -> list[ExtraListener]:
    out = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        proto, sep, address = item.partition("://")
        proto = proto.upper()
        if not sep or proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"--security-listeners: {item!r} is not PROTOCOL://HOST:PORT with PROTOCOL one of "
                             f"{', '.join(SECURITY_PROTOCOLS)}")
        host, port = parse_host_port(address)
        out.append(ExtraListener(proto, host, port))
    return out


class BrokerView:
    """The broker as one listener's requests see it: the same broker, its own advertised address."""

    def __init__(self, broker: Any, host: str, port: int) -> None:
        advertised = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        object.__setattr__(self, "_broker", broker)
        object.__setattr__(self, "config", dataclasses.replace(broker.config,
                                                               advertised_listener=f"{advertised}:{port}"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)
