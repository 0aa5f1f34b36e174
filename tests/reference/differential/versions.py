"""Which versions the wire level checks: every version kbroker serves (its ApiVersions answer, from
broker/apis/SERVED) that Apache Kafka 4.4 serves too. The versions only kbroker serves are listed, not
checked: Kafka closes the connection on them, so there is nothing to compare an answer with.

`sweep` turns one case into a check per version.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kbroker.broker.apis import SERVED
from kbroker.protocol import framing
from kbroker.protocol.kafka_releases import kafka_release

from .runner import Check, Session

# Apache Kafka 4.4.0's ApiVersions answer on a broker listener (KRaft, broker+controller node, default
# features): api key -> (min, max), the table protocol/kafka_releases.json took from Kafka 4.4.0 itself.
# The suite checks it against the running reference before it uses it.
KAFKA_44: dict[int, tuple[int, int]] = dict(kafka_release("4.4").apis)


def api_name(api_key: int) -> str:
    spec = framing.request_spec(api_key)
    assert spec is not None
    return spec.name.removesuffix("Request")


def common_versions(api_key: int) -> range:
    """The versions both brokers serve of an API kbroker serves."""
    _, low, high = SERVED[api_key]
    k_low, k_high = KAFKA_44.get(api_key, (0, -1))
    return range(max(low, k_low), min(high, k_high) + 1)


def kbroker_only_versions() -> dict[str, list[int]]:
    """API name -> versions kbroker serves that Kafka 4.4 does not (not checked: see the module's doc)."""
    from kbroker.broker.app import CLIENT_TELEMETRY_APIS

    out = {}
    for api_key, (_, low, high) in sorted(SERVED.items()):
        if api_key in CLIENT_TELEMETRY_APIS:
            continue  # served with --client-metrics only, as Kafka serves them with a telemetry plugin only
        common = common_versions(api_key)
        only = [v for v in range(low, high + 1) if v not in common]
        if only:
            out[api_name(api_key)] = only
    return out


Build = Callable[[Session, int], Any]


def sweep(api_key: int, case: str, request: Build | None = None, *, steps: Callable[[Session, int], Awaitable[None]]
          | None = None, versions: Iterable[int] | None = None, project: Callable[[Any], Any] | None = None,
          timeout: float | None = None, serial: bool = False) -> list[Check]:
    """One check per version of `api_key`: either the single request `request(session, version)` builds
    (a body, or a coroutine giving one), or the coroutine `steps(session, version)`. `serial`: see Check."""
    assert (request is None) != (steps is None)
    name = api_name(api_key)
    checks = []
    for version in versions if versions is not None else common_versions(api_key):
        assert version in common_versions(api_key), (name, version)

        async def run(s: Session, v: int = version) -> None:
            if steps is not None:
                await steps(s, v)
                return
            assert request is not None
            body = request(s, v)
            if inspect.isawaitable(body):
                body = await body
            kwargs = {"timeout": timeout} if timeout is not None else {}
            await s.call(api_key, v, body, case, project=project, **kwargs)

        checks.append(Check(f"{name} v{version}: {case}", run, api=name, version=version, serial=serial))
    return checks
