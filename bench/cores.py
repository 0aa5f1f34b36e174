"""One core for the broker under test, the other for the load generator, and the CPU each one used.

Issue 17 asks for figures "on one broker core": every broker (kbroker, Tansu, Apache Kafka, the echo
responder that measures the generator's ceiling) is started on BROKER_CORE (`spawning_broker`), so all
its threads (Tansu's tokio workers, kbroker's flusher and file threads, Kafka's network, request
handler, coordinator and garbage collector threads) share that core; the bench process, which
is the load generator (and librdkafka's threads in the data-path runs), pins itself to the other cores.
Beside each rate the bench prints the CPU both sides used over the measured interval, so a reader can
tell whose figure it is: a broker at ~100% of its core with the generator below 100% of its own is the
broker's figure; a generator at 100% is a ceiling of the generator's.

On a machine with one core, nothing is pinned and the output says so.
"""

from __future__ import annotations

import os
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
PINNING = len(_CPUS) >= 2
# The last allowed core for the broker, the rest for the generator (core 0 also takes most interrupts).
BROKER_CORE: set[int] = {_CPUS[-1]} if PINNING else set(_CPUS)
GENERATOR_CORES: set[int] = set(_CPUS[:-1]) if PINNING else set(_CPUS)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (10,000 idle connections need 10,000 descriptors on each
    side); returns the new soft limit. Brokers started by the bench inherit it (see `spawning_broker`),
    so kbroker's fd budget (broker/network/fd_budget.py: soft limit - segment-file cache - 32) admits them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65_536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def pin_generator() -> None:
    """Pin this process (the load generator) to the generator core(s)."""
    if PINNING:
        os.sched_setaffinity(0, GENERATOR_CORES)


@contextmanager
def spawning_broker() -> Iterator[None]:
    """Around the Popen of a broker (or of the start-up floor's process): what it starts inherits the
    broker core and the raised descriptor limit from this thread, which is on the broker core only
    for the spawn.

    Not a `preexec_fn`: with one, subprocess forks this whole process and runs Python in the child
    before exec, and that costs with the bench's size. Measured here, spawning /bin/true took 3.3 ms
    from a fresh bench process and 24-65 ms from one holding 3-6 million objects (the start-up figures
    come late in a full run), while the spawn without it (vfork) took 0.6-0.7 ms in both:
    tens of ms counted in every start-up figure (kbroker's, Tansu's and the floor's) that a broker
    started from a shell never pays. Affinity is per thread on Linux and a child inherits its
    spawning thread's, so the thread moves to the broker core and back."""
    raise_fd_limit()
    if not PINNING:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, BROKER_CORE)
    try:
        yield
    finally:
        try:
            os.sched_setaffinity(0, before)
        except OSError:  # a child already started must still reach its caller; this thread stays put
            pass


def note() -> str:
    if not PINNING:
        return "one core only: broker and load generator share it (nothing pinned)"
    return (f"broker under test pinned to core {min(BROKER_CORE)} (all its threads), load generator pinned to "
            f"core{'s' if len(GENERATOR_CORES) > 1 else ''} {','.join(map(str, sorted(GENERATOR_CORES)))}; "
            f"every broker alike (kbroker, Tansu, Kafka's JVM), all its threads")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a whole process (all its threads) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return float("nan")
    fields = raw[raw.rfind(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15 of stat(5)


def own_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class CpuUse:
    """CPU used over an interval, as a share of one core: 1.0 = one core busy the whole time."""

    broker: float
    generator: float
    seconds: float

    def __str__(self) -> str:
        text = f"CPU: broker {self.broker:.0%} of its core, generator {self.generator:.0%} of its own"
        if self.broker < 0.8 and self.generator < 0.8:
            text += " (neither saturated: the broker waited on I/O or on other work sharing its core)"
        return text

    @property
    def generator_bound(self) -> bool:
        """The generator, not the broker, was what ran out: it used its core and the broker did not."""
        return self.generator >= 0.9 and self.broker < 0.8


class CpuMeter:
    """with CpuMeter(broker_pid) as m: ...; m.use -> CpuUse over the block."""

    def __init__(self, broker_pid: int | None) -> None:
        self.pid = broker_pid
        self.use = CpuUse(float("nan"), float("nan"), 0.0)

    def __enter__(self) -> CpuMeter:
        self._t = time.perf_counter()
        self._own = own_cpu_seconds()
        self._broker = process_cpu_seconds(self.pid) if self.pid else float("nan")
        return self

    def __exit__(self, *_: object) -> None:
        wall = max(1e-9, time.perf_counter() - self._t)
        broker = (process_cpu_seconds(self.pid) - self._broker) / wall if self.pid else float("nan")
        self.use = CpuUse(broker, (own_cpu_seconds() - self._own) / wall, wall)
