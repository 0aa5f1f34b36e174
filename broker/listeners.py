"""Kafka's listener settings: `listeners`, `advertised.listeners`, `listener.security.protocol.map`.

    listeners=PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:29092
    advertised.listeners=PLAINTEXT://localhost:9092,INTERNAL://kbroker:29092
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT

As in Kafka: each listener is `NAME://HOST:PORT`; the name must be a key of the security protocol map
(setting the map replaces the default one); names are unique, and so are ports; an empty host binds
every interface; `advertised.listeners` defaults to `listeners`, may only name listeners that exist,
and may not advertise 0.0.0.0 (an empty advertised host means this machine's host name). A client
is told the advertised address of the listener it connected to (Metadata, FindCoordinator,
DescribeCluster). Every protocol is served: SSL and SASL_SSL need `ssl.keystore.location`, SASL_*
listeners authenticate with `sasl.enabled.mechanisms` (broker/security/).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

# Kafka's default, in the order Kafka spells it (DescribeConfigs shows it as written)
DEFAULT_SECURITY_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = SECURITY_PROTOCOLS  # TLS and SASL: broker/security/ (issue 14)
# Kafka's EndPoint regex: NAME://HOST:PORT, the host optionally in brackets (IPv6) or empty.
_ENDPOINT = re.compile(r"^(?P<name>[^:/]*)://\[?(?P<host>[0-9a-zA-Z\-%._:]*?)\]?:(?P<port>-?[0-9]+)$")
_LISTENER_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class ListenerError(ValueError):
    """A listener setting Kafka would refuse; the message names the option and the value."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # the listener name, upper case as Kafka normalises it
    host: str
    port: int
    security_protocol: str

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Listeners:
    bind: tuple[Endpoint, ...]  # what the broker listens on, in the configured order
    advertised: dict[str, Endpoint]  # listener name -> what clients on it are told

    def advertised_for(self, name: str) -> Endpoint:
        return self.advertised.get(name) or self.advertised[self.bind[0].name]

    def describe(self, which: str) -> str:
        items = self.bind if which == "listeners" else [self.advertised[e.name] for e in self.bind]
        return ",".join(e.url() for e in items)


def parse_protocol_map(text: str, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in _items(text):
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ListenerError(f"{option}: {item!r} is not NAME:PROTOCOL")
        if not _LISTENER_NAME.fullmatch(name):
            raise ListenerError(f"{option}: listener name {name!r} has characters outside [A-Za-z0-9_.-]")
        if proto not in SECURITY_PROTOCOLS:
            raise ListenerError(f"{option}: unknown security protocol {proto!r} for {name} "
                                f"(known: {', '.join(SECURITY_PROTOCOLS)})")
        if name in out:
            raise ListenerError(f"{option}: listener {name} is mapped twice")
        out[name] = proto
    return out


def parse_endpoints(text: str, option: str, protocols: dict[str, str], map_option: str) -> list[Endpoint]:
    out: list[Endpoint] = []
    for item in _items(text):
        m = _ENDPOINT.match(item)
        if m is None:
            if "://" not in item:
                raise ListenerError(f"{option}: {item!r} is not NAME://HOST:PORT (for example PLAINTEXT://0.0.0.0:9092)")
            raise ListenerError(f"{option}: {item!r} needs a port (NAME://HOST:PORT)")
        name = m["name"].upper()
        if not name:
            raise ListenerError(f"{option}: {item!r} has no listener name before ://")
        if name not in protocols:
            raise ListenerError(f"{option}: unknown listener name {name!r} in {item!r}: not in {map_option} "
                                f"({', '.join(protocols)})")
        port = int(m["port"])
        if not 1 <= port <= 65535:
            raise ListenerError(f"{option}: port {port} of {item!r} is outside 1-65535")
        if any(e.name == name for e in out):
            raise ListenerError(f"{option}: listener {name} appears twice")
        out.append(Endpoint(name, m["host"], port, protocols[name]))
    return out


def resolve(listeners: str, advertised_listeners: str, protocol_map: str, *, options: dict[str, str] | None = None,
            legacy_loopback: bool = False, skip: frozenset[str] = frozenset()) -> Listeners:
    """Check the three settings together as Kafka does. `options` names each setting in messages
    (the flag, variable or TOML key it came from). `legacy_loopback`: the old `--listen` without
    `--advertised-listener` advertised 127.0.0.1 for a wildcard host; it still does. `skip`: the
    names of KRaft's controller listeners, checked with the others but neither bound nor advertised."""
    names = {"listeners": "--listeners", "advertised_listeners": "--advertised-listeners",
             "listener_security_protocol_map": "--listener-security-protocol-map", **(options or {})}
    protocols = parse_protocol_map(protocol_map, names["listener_security_protocol_map"])
    bind = parse_endpoints(listeners, names["listeners"], protocols, names["listener_security_protocol_map"])
    if not bind:
        raise ListenerError(f"{names['listeners']}: no listener given ({listeners!r})")
    if skip and all(e.name in skip for e in bind):
        raise ListenerError(f"{names['listeners']}: every listener of {listeners!r} is a controller listener "
                            f"(controller.listener.names): add one for clients, e.g. PLAINTEXT://:9092")
    ports: dict[int, str] = {}
    for e in bind:
        if e.port in ports:
            raise ListenerError(f"{names['listeners']}: {ports[e.port]} and {e.name} both use port {e.port}")
        ports[e.port] = e.name
        if e.security_protocol not in SERVED_PROTOCOLS:
            raise ListenerError(f"{names['listeners']}: listener {e.name} uses {e.security_protocol}, which kbroker "
                                f"does not support yet (only PLAINTEXT)")
    bind = [e for e in bind if e.name not in skip]
    by_name = {e.name: e for e in bind}
    adv_option = names["advertised_listeners"]
    advertised: dict[str, Endpoint] = {}
    if advertised_listeners.strip():
        for e in parse_endpoints(advertised_listeners, adv_option, protocols, names["listener_security_protocol_map"]):
            if e.name in skip:
                continue
            if e.name not in by_name:
                raise ListenerError(f"{adv_option}: {e.url()} names listener {e.name}, which is not in "
                                    f"{names['listeners']} ({listeners})")
            advertised[e.name] = e
    for e in bind:
        if e.name not in advertised:
            host = e.host
            if legacy_loopback and host in ("0.0.0.0", "::", ""):
                host = "127.0.0.1"
            elif host == "":
                host = socket.getfqdn()  # Kafka advertises the canonical host name for an empty host
            advertised[e.name] = Endpoint(e.name, host, e.port, e.security_protocol)
    for e in advertised.values():
        if e.host in ("0.0.0.0", "::"):
            where = adv_option if e.name in _named(advertised_listeners) else names["listeners"]
            raise ListenerError(f"{where}: cannot advertise the non-routable address {e.host} for {e.name}; "
                                f"set {adv_option} to a host clients can reach")
    return Listeners(tuple(bind), advertised)


def _named(text: str) -> set[str]:
    return {item.split("://", 1)[0].upper() for item in _items(text)}


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
