"""The SCRAM credentials file is rewritten by two processes: a running broker (AlterUserScramCredentials)
and `kbroker user add`. Each keeps the other's change, whichever order their reads and writes fall in;
the PLAIN users file likewise between two `kbroker user add`s."""

from __future__ import annotations

import asyncio
import threading

from kbroker.broker.log.files import held_for_rewrite, write_file_durably
from kbroker.broker.security.credentials import (
    CredentialStore, ScramCredential, _render, add_plain_user, parse_plain_users, scram_path,
)
from kbroker.broker.workers import STATE_FILES, run_in_worker

SHA256 = "SCRAM-SHA-256"


def cred(password: str) -> ScramCredential:
    return ScramCredential.from_password(SHA256, password)


def on_disk(data) -> set[str]:
    return set(CredentialStore(data).scram_users())


async def test_a_user_added_while_the_brokers_write_waits_is_kept_by_both(tmp_path):
    """The broker applies carol and queues its write; `kbroker user add dave` reads and writes the file
    before that write runs. The broker's write finds a file it did not write, re-reads it and puts
    carol on top: dave stays on disk and the broker serves him too."""
    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])  # the file the broker started with
    gate = threading.Event()
    blocker = asyncio.ensure_future(run_in_worker(STATE_FILES, gate.wait, 10))  # the worker is busy
    await asyncio.sleep(0.05)
    alter = asyncio.ensure_future(broker.alter_scram([("carol", SHA256, cred("carol"))], []))
    await asyncio.sleep(0.05)
    assert not alter.done()
    dave = cred("dave")
    CredentialStore(data).apply_scram([("dave", SHA256, dave)], [])  # another process: `kbroker user add`
    assert on_disk(data) == {"bob", "dave"}
    gate.set()
    await blocker
    await alter
    assert on_disk(data) == {"bob", "carol", "dave"}
    assert broker.scram("dave", SHA256) == dave and set(broker.scram_users()) == {"bob", "carol", "dave"}


async def test_the_brokers_write_waits_for_a_rewrite_under_way_and_keeps_it(tmp_path):
    """While another process holds the file for its rewrite, the broker's write waits; then it keeps
    what that process wrote. Changes applied while its write was under way go into the next one."""
    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])
    path = scram_path(data)
    eve = cred("eve")
    with held_for_rewrite(path):
        alter = asyncio.ensure_future(broker.alter_scram([("carol", SHA256, cred("carol"))], []))
        await asyncio.sleep(0.3)
        assert not alter.done()  # held by the lock, not written over the other process's file
        later = asyncio.ensure_future(broker.alter_scram([("frank", SHA256, cred("frank"))], [("bob", SHA256)]))
        await asyncio.sleep(0)
        write_file_durably(path, _render({"bob": {SHA256: cred("bob")}, "eve": {SHA256: eve}}), 0o600)
    await alter
    await later
    assert on_disk(data) == {"carol", "eve", "frank"}
    assert set(broker.scram_users()) == {"carol", "eve", "frank"} and broker.scram("eve", SHA256) == eve


async def test_the_brokers_own_writes_are_still_not_read_back(tmp_path, monkeypatch):
    """With no other writer the file is not parsed again, after one write or several in a burst."""
    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])
    parsed: list[int] = []
    real = broker._scram.parse
    monkeypatch.setattr(broker._scram, "parse", lambda text: parsed.append(1) or real(text))
    await asyncio.gather(*(broker.alter_scram([(f"u{i}", SHA256, cred(f"u{i}"))], []) for i in range(5)))
    assert set(broker.scram_users()) == {"bob"} | {f"u{i}" for i in range(5)} and not parsed
    assert on_disk(data) == set(broker.scram_users())


def test_plain_users_added_at_once_are_all_kept(tmp_path):
    """Two `kbroker user add --mechanism PLAIN` at once: each keeps the other's lines."""
    path = tmp_path / "plain-users"
    errors: list[BaseException] = []

    def add(prefix: str) -> None:
        try:
            for i in range(40):
                add_plain_user(path, f"{prefix}{i}", "secret")
        except BaseException as e:  # noqa: BLE001 - the test reports it
            errors.append(e)

    threads = [threading.Thread(target=add, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(parse_plain_users(path.read_text())) == {f"{p}{i}" for p in "ab" for i in range(40)}
