"""A state file rewritten whole off the event loop: every save returns once the file durably holds
the change made before it, saves asked for during a write share the next one, and a failed write
reaches every save it was to hold."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

from kbroker.broker.storage.state_file import StateFile


class Counter:
    def __init__(self) -> None:
        self.values: list[int] = []
        self.captures = 0
        self.threads: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()

    def capture(self):
        self.captures += 1
        values = list(self.values)

        def render() -> bytes:
            self.threads.add(threading.current_thread().name)
            self.gate.wait(10)  # a slow disk, held by the test
            return json.dumps(values).encode()

        return render


async def test_each_save_returns_once_the_file_holds_its_change(tmp_path: Path) -> None:
    state = Counter()
    file = StateFile(tmp_path / "sub" / "state.json", state.capture)

    async def change(i: int) -> list[int]:
        state.values.append(i)
        await file.save()
        return json.loads(file.path.read_text())

    seen = await asyncio.gather(*(change(i) for i in range(20)))
    for i, held in enumerate(seen):
        assert i in held
    assert json.loads(file.path.read_text()) == list(range(20))
    assert state.threads == {"kbroker-state-files_0"}  # rendered and written on the worker, not the loop


async def test_saves_asked_for_during_a_write_share_the_next_one(tmp_path: Path) -> None:
    state = Counter()
    file = StateFile(tmp_path / "state.json", state.capture, mode=0o600)
    state.gate.clear()  # the first write waits on its "disk"
    state.values.append(0)
    first = asyncio.create_task(file.save())
    await asyncio.sleep(0.05)
    assert state.captures == 1 and not first.done()
    later = []
    for i in range(1, 50):
        state.values.append(i)
        later.append(asyncio.create_task(file.save()))
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in later)  # their changes are not in the write under way
    state.gate.set()
    await asyncio.gather(first, *later)
    assert state.captures == 2  # fifty changes, two writes
    assert json.loads(file.path.read_text()) == list(range(50))
    assert os.stat(file.path).st_mode & 0o777 == 0o600


async def test_a_failed_write_reaches_the_saves_it_was_to_hold(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the directory should be")
    state = Counter()
    file = StateFile(tmp_path / "blocked" / "state.json", state.capture)
    state.values.append(1)
    results = await asyncio.gather(file.save(), file.save(), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results), results
    file.path = tmp_path / "state.json"  # the disk is back: the next save writes
    await file.save()
    assert json.loads(file.path.read_text()) == [1]


async def test_caught_up_waits_for_the_writes_under_way_and_only_those(tmp_path: Path) -> None:
    """A request that changes nothing (its ACL is there already, added by a request whose write is
    under way) is answered no sooner than that write is durable, and at once when none is."""
    state = Counter()
    file = StateFile(tmp_path / "state.json", state.capture)
    await file.caught_up()  # nothing asked: returns at once
    state.gate.clear()
    state.values.append(7)
    saving = asyncio.create_task(file.save())
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(file.caught_up())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    state.gate.set()
    await asyncio.gather(saving, waiting)
    assert json.loads(file.path.read_text()) == [7]
    assert state.captures == 1  # caught_up asks for no write of its own


def test_a_private_file_stays_private_over_a_temporary_file_left_by_a_crash(tmp_path: Path) -> None:
    """The SCRAM and PLAIN user files are written 0600; a temporary file a crash left behind, with a
    wider mode, is not reused with its mode."""
    from kbroker.broker.storage.log.files import write_file_durably

    path = tmp_path / "scram-credentials.json"
    stale = tmp_path / "scram-credentials.json.tmp"
    stale.write_bytes(b"half a file")
    os.chmod(stale, 0o644)
    write_file_durably(path, b"{}", 0o600)
    assert path.read_bytes() == b"{}" and os.stat(path).st_mode & 0o777 == 0o600 and not stale.exists()
