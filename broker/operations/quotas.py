"""Client quotas: the entities and values of Describe/AlterClientQuotas, stored in the data dir,
and Kafka's produce and fetch byte-rate enforcement.

Storage: `<data-dir>/client-quotas.json`, rewritten durably on every change (broker/storage/state_file.py:
off the event loop, changes made meanwhile sharing one write), so quotas survive a restart as they
do in Kafka's metadata log. One entity per line, each with its CRC32C: an entity whose entry is
damaged is not loaded (its quotas are not enforced until set again) and `client_quotas_file_damaged`
(error) names it as far as it still reads; the others load, and the broker always starts. A file
from before checksums loads as it did.

Enforcement follows Kafka's ClientQuotaManager: a client's bytes are recorded in a rate over
`quota.window.num` (11) samples of `quota.window.size.seconds` (1 s); when the rate exceeds the
quota the throttle time is (rate - quota) / quota * window, where the window counts at least
(samples - 1) full samples, and it is reported in the response's throttle_time_ms. The quota that
applies is the most specific of Kafka's eight (user, client-id) combinations; without
authentication the user is ANONYMOUS, as Kafka's principal on a PLAINTEXT listener.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

import structlog

from ..storage.state_file import StateFile, read_rows, render_rows

FILE_NAME = "client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
# Kafka's quota keys and the entity types each applies to.
KEYS = {
    PRODUCER_BYTE_RATE: (USER, CLIENT_ID),
    CONSUMER_BYTE_RATE: (USER, CLIENT_ID),
    "request_percentage": (USER, CLIENT_ID),
    "controller_mutation_rate": (USER, CLIENT_ID),
    "connection_creation_rate": (IP,),
}
_INTEGER_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, "connection_creation_rate")
ANONYMOUS = "ANONYMOUS"
SAMPLES = 11
SAMPLE_MS = 1000

# An entity is a sorted tuple of (entity type, name or None for the default entity).
Entity = tuple[tuple[str, str | None], ...]


async def hold_back_for_old_clients(response, api_version: int, kip_219_from: int):
    """Before KIP-219 Kafka throttled a client by holding its response back; from `kip_219_from`
    on, clients read throttle_time_ms and back off themselves."""
    if response.throttle_time_ms > 0 and api_version < kip_219_from:
        await asyncio.sleep(response.throttle_time_ms / 1000)
    return response


class QuotaError(ValueError):
    """An invalid entity or value: Kafka answers INVALID_REQUEST with this message."""


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    pairs = list(pairs)
    types = [t for t, _ in pairs]
    if not pairs:
        raise QuotaError("Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise QuotaError("Duplicate entity type in client quota entity")
    for t in types:
        if t not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {t}")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    return tuple(sorted(pairs))


def check_value(entity: Entity, key: str, value: float) -> None:
    allowed = KEYS.get(key)
    types = {t for t, _ in entity}
    if allowed is None or not types <= set(allowed):
        raise QuotaError(f"Invalid configuration key {key}")
    if key in _INTEGER_KEYS and value != math.floor(value):
        raise QuotaError(f"Configuration {key} must be a Long value")
    if value <= 0:
        raise QuotaError(f"Configuration {key} must be a positive value")


class _Rate:
    """Kafka's sampled Rate: bytes per second over the last SAMPLES windows of SAMPLE_MS."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: deque[list[int]] = deque()  # [window start ms, bytes]

    def record(self, value: int, now_ms: int) -> float:
        start = now_ms - now_ms % SAMPLE_MS
        if not self.samples or self.samples[-1][0] != start:
            self.samples.append([start, 0])
        self.samples[-1][1] += value
        while self.samples and self.samples[0][0] <= now_ms - SAMPLES * SAMPLE_MS:
            self.samples.popleft()
        return self.rate(now_ms)

    def window_ms(self, now_ms: int) -> int:
        elapsed = now_ms - self.samples[0][0] if self.samples else 0
        full = elapsed // SAMPLE_MS
        if full < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full) * SAMPLE_MS
        return elapsed

    def rate(self, now_ms: int) -> float:
        return sum(b for _, b in self.samples) * 1000.0 / self.window_ms(now_ms)


log = structlog.get_logger("kbroker.quotas")


def _render(quotas: list[tuple[Entity, dict[str, float]]]) -> bytes:
    return render_rows("quotas", ({"entity": [list(p) for p in entity], "values": values} for entity, values in quotas))


def _load(path: Path) -> dict[Entity, dict[str, float]]:
    """The entities whose entries verify; damage is reported, never raised (the broker must start)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        _report(path, [f"the file cannot be read: {exc!r}"], [])
        return {}
    read = read_rows(raw, "quotas", list)  # before checksums: a JSON array of the same entries
    quotas: dict[Entity, dict[str, float]] = {}
    reasons = read.reasons()
    for row in read.rows:
        try:
            quotas[tuple((t, n) for t, n in row["entity"])] = dict(row["values"])
        except Exception as exc:  # noqa: BLE001 - an entry whose checksum holds but whose content is not ours
            reasons.append(f"entry {row!r}: {exc!r}")
    if reasons:
        _report(path, reasons, [d.body.get("entity") for d in read.damage if d.body is not None])
    return quotas


def _report(path: Path, reasons: list[str], entities: list) -> None:
    log.error("client_quotas_file_damaged", file=str(path), damage=reasons[:20], damaged_places=len(reasons),
              entities=entities[:20],
              detail="the damaged entries' quotas are not enforced until they are set again (kafka-configs --alter "
                     "--entity-type users|clients|ips, or AlterClientQuotas); every other quota is. The next quota "
                     "change rewrites the file without the damaged entries")


class ClientQuotas:
    def __init__(self, data_dir: Path, clock=lambda: int(time.time() * 1000)) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.clock = clock
        self.quotas: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, Entity], _Rate] = {}
        self._file = StateFile(self.path, self._capture)
        self.quotas.update(_load(self.path))

    def _capture(self) -> Callable[[], bytes]:
        # Each entity's values are replaced, never changed in place (alter): the items are a snapshot.
        return partial(_render, list(self.quotas.items()))

    async def alter(self, changes: list[tuple[Entity, list[tuple[str, float, bool]]]]) -> None:
        """Apply already-validated (entity, [(key, value, remove)]) changes; return once durable."""
        for entity, ops in changes:
            values = dict(self.quotas.get(entity, ()))
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                self.quotas[entity] = values
            else:
                self.quotas.pop(entity, None)
        await self._file.save()

    def matching(self, components: list[tuple[str, int, str | None]], strict: bool) -> dict[Entity, dict[str, float]]:
        """DescribeClientQuotas' filter: (entity type, match type 0 exact / 1 default / 2 any, name)."""
        out = {}
        for entity, values in self.quotas.items():
            names = dict(entity)
            if strict and set(names) != {t for t, _, _ in components}:
                continue
            ok = True
            for etype, match, name in components:
                if etype not in names:
                    ok = False
                elif match == 0 and names[etype] != name:
                    ok = False
                elif match == 1 and names[etype] is not None:
                    ok = False
            if ok:
                out[entity] = values
        return out

    def _quota_for(self, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """The most specific quota of Kafka's precedence order, and the entity it is tracked under."""
        for entity in (
            ((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
            ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
            ((CLIENT_ID, client_id),), ((CLIENT_ID, None),),
        ):
            value = self.quotas.get(entity, {}).get(key)
            if value is not None:
                # A default entity's quota is shared by nobody: each client is metered on its own.
                tracked = tuple((t, user if t == USER else client_id) for t, _ in entity)
                return tracked, value
        return None

    def record(self, key: str, client_id: str, size: int, user: str = ANONYMOUS) -> int:
        """Record `size` bytes of produce or fetch; return the throttle time in ms (0 if within quota)."""
        found = self._quota_for(key, user, client_id) if self.quotas else None
        if found is None:
            return 0
        tracked, quota = found
        now = self.clock()
        rate = self._rates.setdefault((key, tracked), _Rate())
        observed = rate.record(size, now)
        if observed <= quota:
            return 0
        return int((observed - quota) / quota * rate.window_ms(now))
