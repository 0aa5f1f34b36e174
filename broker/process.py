"""The broker process's life: what reading the settings found said, the PostgreSQL node opened
(`--cluster`), the broker built and started, SIGTERM/SIGINT awaited, the broker stopped. broker/app.py
wires the broker itself; this module runs it."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import signal
import sys
import time
from typing import TYPE_CHECKING

import structlog
import uvloop

from .app import Broker
from .config import BrokerConfig, Sources
from .logging import configure_logging
from .startup import Prepared

if TYPE_CHECKING:
    from .postgres_node import PostgresNode

log = structlog.get_logger("kbroker.broker")


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None, prepared: Prepared | None = None,
                sources: Sources | None = None) -> int:
    started = time.monotonic()
    for notice in sources.notices if sources is not None else ():  # what the settings' reading found
        getattr(log, notice.level)(notice.event, **notice.fields)
    postgres = None
    if config.cluster:
        postgres = await _open_postgres_node(config)
        if postgres is None:
            if prepared is not None:
                prepared.close()
            return 1
        config = dataclasses.replace(config, cluster_id=postgres.cluster_id)
    broker = Broker(config, prepared, frozenset(sources.levels) if sources is not None else frozenset(), postgres)
    # The CLI imports and builds the broker with the cyclic collector off (broker/cli.py): what that
    # made stays (frozen, so later passes skip it), and the collector runs from here on (the replay
    # of __consumer_offsets pauses it again while it builds the groups).
    gc.freeze()
    gc.enable()
    await broker.start()
    if config.profile:
        from .config import TEST_PROFILE

        log.info("profile_applied", profile=config.profile,
                 settings={name: getattr(config, name) for name in TEST_PROFILE})
    log.info(
        "broker_started",
        metrics=f"http://{config.metrics_listen.rsplit(':', 1)[0]}:{broker.admin_port}" if broker.admin_http else None,
        test_controls=config.test_controls,
        listeners=broker.listeners.describe("listeners"),
        advertised_listeners=broker.listeners.describe("advertised"),
        data_dir=str(broker.data_dir),
        cluster_id=broker.cluster_id,
        node_id=broker.node_id,
        startup_ms=round(1000 * (time.monotonic() - started), 1),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("broker_stopping")
    stopped = time.monotonic()
    await broker.stop()
    log.info("broker_stopped", shutdown_ms=round(1000 * (time.monotonic() - stopped), 1))
    return 0


async def _open_postgres_node(config: BrokerConfig) -> PostgresNode | None:
    """--cluster: the database opened and this node registered, or None (said in one line)."""
    from .postgres_node import PostgresNode
    from .storage.postgres.schema import ClusterDatabaseError
    from .topic_defaults import log_config
    from ..purgatory.clock import SystemClock

    listeners = config.listener_set()
    endpoints = {}
    for e in listeners.bind:
        advertised = listeners.advertised_for(e.name)
        endpoints[e.name] = f"{advertised.host}:{advertised.port}"
    try:
        return await PostgresNode.open(config, endpoints, log_config(config), SystemClock())
    except ClusterDatabaseError as e:
        log.error("cluster_database_refused", error=str(e))
        return None


# Compaction and replay decode in worker threads; a 1 ms GIL switch interval (5 ms by default) keeps
# the event loop's wait for the interpreter short while they run (see `python -m bench.stalls`).
GIL_SWITCH_INTERVAL_S = 0.001


def run(config: BrokerConfig, prepared: Prepared | None = None, sources: Sources | None = None) -> int:
    """Serve until SIGTERM/SIGINT. `prepared` comes from kbroker.broker.startup.prepare(), which the
    CLI runs first so that a start-up mistake is one line on stderr and nothing else; `sources`
    (where each setting came from) from load_config_with_sources."""
    configure_logging(config.log_format, config.log_level)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    return uvloop.run(serve(config, prepared=prepared, sources=sources))
