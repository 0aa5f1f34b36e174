"""Named single-thread workers for CPU-heavy work a client's request may cause, off the event loop.

Each kind of work has its own thread so it queues only behind its own kind: the default executor's
threads make appends durable (fsync), and neither an old client's down-conversion nor a hostile
producer's batch check may wait in front of them, or behind each other. One thread per kind also
bounds what such work holds at once (one inflated batch, not one per client). The loop still gets
the GIL every switch interval while a worker runs Python code, so other clients are served, slower.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, TypeVar

T = TypeVar("T")

DOWN_CONVERT = "down-convert"  # Fetch v0-v3: stored batches rebuilt as old message sets
PRODUCE_CHECK = "produce-check"  # Produce: batches past a request's inline budget (log.validation)
OFFSET_SEARCH = "offset-search"  # ListOffsets: a batch too costly to search on the loop (log.timestamp_search)
STATE_FILES = "state-files"  # the ACL, client-quota and SCRAM files, rendered and written whole (state_file)
CHECKPOINTS = "checkpoints"  # partitions' checkpoint.json a prune moved the log start of (log.checkpoint)

_workers: dict[str, ThreadPoolExecutor] = {}


def _worker(name: str) -> ThreadPoolExecutor:
    executor = _workers.get(name)
    if executor is None:
        executor = _workers[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kbroker-{name}")
    return executor


async def run_in_worker(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) on the worker thread `name`, awaited from the loop."""
    return await asyncio.get_running_loop().run_in_executor(_worker(name), partial(fn, *args, **kwargs))
