"""The SCRAM credentials file is rewritten by two processes: a running broker (AlterUserScramCredentials)
and `kbroker user add`. Each keeps the other's change, whichever order their reads and writes fall in;
the PLAIN users file likewise between two `kbroker user add`s."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from kbroker.broker.storage.log.files import RewriteLockTimeout, held_for_rewrite, write_file_durably
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


def second_writer_is_kept_out(data) -> None:
    """Another writer's rewrite while the lock is held: refused once the (shortened) wait is over."""
    with pytest.raises(RewriteLockTimeout):
        CredentialStore(data).apply_scram([("mallory", SHA256, cred("mallory"))], [])


def test_no_file_deleted_while_the_lock_is_held_lets_a_second_writer_in(tmp_path, monkeypatch):
    """The lock was a `scram-credentials.json.lock` beside the file: deleted while held (a clean-up of
    stray files), the next writer made a new one, locked it and rewrote the file beside the holder."""
    from kbroker.broker.storage.log import files

    monkeypatch.setattr(files, "REWRITE_LOCK_WAIT_S", 0.2)
    data = tmp_path / "data"
    CredentialStore(data).apply_scram([("bob", SHA256, cred("bob"))], [])
    path = scram_path(data)
    with held_for_rewrite(path):
        for stray in path.parent.iterdir():
            if stray != path:
                stray.unlink()
        second_writer_is_kept_out(data)
    assert on_disk(data) == {"bob"}
    CredentialStore(data).apply_scram([("carol", SHA256, cred("carol"))], [])  # released: writers go on
    assert on_disk(data) == {"bob", "carol"}


def test_where_a_directory_cannot_be_locked_a_lock_file_beside_the_file_is(tmp_path, monkeypatch):
    """NFS emulates flock with record locks, and an exclusive one on a directory (opened read-only)
    fails with EBADF: the rewrite then locks `<file>.lock`, and two writers still exclude each other."""
    import errno
    import fcntl
    import stat

    from kbroker.broker.storage.log import files

    real_flock = fcntl.flock

    def nfs_flock(fd: int, op: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, "Bad file descriptor")
        real_flock(fd, op)

    monkeypatch.setattr(files.fcntl, "flock", nfs_flock)
    monkeypatch.setattr(files, "REWRITE_LOCK_WAIT_S", 0.2)
    data = tmp_path / "data"
    CredentialStore(data).apply_scram([("bob", SHA256, cred("bob"))], [])
    path = scram_path(data)
    assert path.with_name(path.name + ".lock").exists()
    with held_for_rewrite(path):
        second_writer_is_kept_out(data)
    assert on_disk(data) == {"bob"}


async def test_the_brokers_own_writes_are_still_not_read_back(tmp_path, monkeypatch):
    """With no other writer the file is not parsed again, by a login or by the write itself, after one
    write or a burst that shares the next."""
    from kbroker.broker.security import credentials

    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])
    parsed: list[int] = []
    writes: list[int] = []
    real_parse, real_render = credentials._parse_scram, credentials._render
    monkeypatch.setattr(credentials, "_parse_scram", lambda raw, path=None: parsed.append(1) or real_parse(raw, path))
    monkeypatch.setattr(broker._scram, "parse", credentials._parse_scram)
    monkeypatch.setattr(credentials, "_render", lambda users: writes.append(1) or real_render(users))
    first = asyncio.ensure_future(broker.alter_scram([("u0", SHA256, cred("u0"))], []))
    await asyncio.sleep(0.01)  # its write is under way: the next ones share one after it
    await asyncio.gather(first, *(broker.alter_scram([(f"u{i}", SHA256, cred(f"u{i}"))], []) for i in range(1, 5)))
    assert len(writes) == 2
    assert set(broker.scram_users()) == {"bob"} | {f"u{i}" for i in range(5)} and not parsed
    assert on_disk(data) == set(broker.scram_users())


async def test_a_failed_write_does_not_override_a_later_cli_change(tmp_path, monkeypatch):
    """An alter whose write failed (its client was told so) is not written later over what `kbroker
    user add` wrote since: the CLI's bob and alice are served and stay on disk."""
    from kbroker.broker.storage import state_file

    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob")), ("alice", SHA256, cred("alice-0"))], [])
    real = state_file.write_file_durably
    failing = [True]

    def write(path, data, mode=0o644):
        if failing and failing.pop():
            raise OSError(28, "No space left on device (injected)")
        return real(path, data, mode)

    monkeypatch.setattr(state_file, "write_file_durably", write)
    try:
        await broker.alter_scram([("alice", SHA256, cred("alice-A"))], [("bob", SHA256)])
    except OSError as e:
        assert e.errno == 28
    else:
        raise AssertionError("the write was to fail")
    bob, alice_b = cred("bob-new"), cred("alice-B")
    CredentialStore(data).apply_scram([("bob", SHA256, bob), ("alice", SHA256, alice_b)], [])
    assert broker.scram("bob", SHA256) == bob and broker.scram("alice", SHA256) == alice_b
    await broker.alter_scram([("carol", SHA256, cred("carol"))], [])
    again = CredentialStore(data)
    assert again.scram("bob", SHA256) == bob and again.scram("alice", SHA256) == alice_b
    assert set(again.scram_users()) == {"alice", "bob", "carol"}


async def test_a_holder_that_does_not_let_go_fails_the_write_and_holds_nothing_else(tmp_path, monkeypatch):
    """Past the wait, the broker's write fails (its client learns it) instead of holding the shared
    state-file worker; once the holder is gone, the next write goes through."""
    from kbroker.broker.storage.log import files

    monkeypatch.setattr(files, "REWRITE_LOCK_WAIT_S", 0.2)
    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])
    with held_for_rewrite(scram_path(data)):
        try:
            await asyncio.wait_for(broker.alter_scram([("carol", SHA256, cred("carol"))], []), 5)
        except files.RewriteLockTimeout:
            pass
        else:
            raise AssertionError("the write was to time out")
        await run_in_worker(STATE_FILES, lambda: None)  # the worker is free again
        assert on_disk(data) == {"bob"}
    await broker.alter_scram([("dave", SHA256, cred("dave"))], [])
    assert {"bob", "dave"} <= on_disk(data)


async def test_another_writer_is_seen_by_its_inode_alone(tmp_path):
    """`kbroker user add` replacing a credential with one of the same length, within the same tick of
    the file system's clock: size and mtime are the same, the inode is not."""
    import os

    data = tmp_path / "data"
    broker = CredentialStore(data)
    broker.apply_scram([("bob", SHA256, cred("bob"))], [])
    path = scram_path(data)
    before = os.stat(path)
    bob = cred("bob-2")
    CredentialStore(data).apply_scram([("bob", SHA256, bob)], [])
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ino != before.st_ino
    await broker.alter_scram([("carol", SHA256, cred("carol"))], [])
    assert CredentialStore(data).scram("bob", SHA256) == bob and broker.scram("bob", SHA256) == bob


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


def test_user_add_says_so_when_the_file_stays_held(tmp_path, monkeypatch, capsys):
    """`kbroker user add` against a file another process keeps held: exit 1 and a line saying what
    was written, not a traceback; once it is free the same command works."""
    from kbroker.broker import cli
    from kbroker.broker.storage.log import files

    monkeypatch.setattr(files, "REWRITE_LOCK_WAIT_S", 0.2)
    data, plain = tmp_path / "data", tmp_path / "plain-users"
    args = ["user", "add", "zoe", "--password", "pw", "--data-dir", str(data), "--mechanism", "PLAIN",
            "--mechanism", SHA256, "--plain-users-file", str(plain)]
    scram_path(data).parent.mkdir(parents=True)
    with held_for_rewrite(scram_path(data)):
        assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "held by another process (PLAIN written); try again" in err and "Traceback" not in err
    assert "zoe" in parse_plain_users(plain.read_text()) and on_disk(data) == set()
    assert cli.main(args) == 0 and on_disk(data) == {"zoe"}
