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

from .runner import Check, Session

# Apache Kafka 4.4.0's ApiVersions answer on a broker listener (KRaft, broker+controller node, default
# features): api key -> (min, max). The suite checks it against the running reference before it uses it.
KAFKA_44: dict[int, tuple[int, int]] = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 5), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2),
    28: (0, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 3), 43: (0, 2),
    44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0),
    55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 80: (0, 1),
    81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 1), 89: (0, 1),
    90: (0, 1), 91: (0, 0), 92: (0, 0), 93: (0, 0), 94: (0, 0),
}


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
    out = {}
    for api_key, (_, low, high) in sorted(SERVED.items()):
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
