"""Who may authenticate: SCRAM credentials (salted, in the data directory) and PLAIN users (a file).

SCRAM credentials are kept as Kafka keeps them: salt, StoredKey, ServerKey and the iteration count,
never the password. They live in `<data-dir>/security/scram-credentials.json`, written atomically
(temporary file, fsync, rename) and re-read when the file changes, so `kbroker user add` reaches a
running broker. PLAIN users come from a file of `name=password` lines (`#` comments), as Kafka takes
them from its JAAS `user_NAME="password"` options; it is re-read when it changes too.

AlterUserScramCredentials changes the credentials in memory and has the file rewritten on the
`state-files` worker (broker/storage/state_file.py), answering once it is durable; the file the broker wrote
itself is not read back. Rendered and written on the loop, with parsing it back at the next login,
one change among 100,000 users held every client for seconds.

`kbroker user add` may rewrite the file while the broker does. Both rewrite it under one lock
(`held_for_rewrite`), and the broker keeps the changes it has not yet seen written: if the file is
not the one it last read or wrote, its write re-reads it and applies those changes on top, so
neither side's change is lost (before, the later writer's copy dropped the other's user, an
acknowledged AlterUserScramCredentials among them).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..storage.log.files import held_for_rewrite, write_file_durably
from ..storage.state_file import StateFile

SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# AlterUserScramCredentials' mechanism codes (Kafka's ScramMechanism.type)
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations()
MAX_ITERATIONS = 16384  # Kafka's limit for AlterUserScramCredentials


@dataclass(slots=True, frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        import scramp  # only where a password is salted here (`kbroker user add`, --dev-security users)

        salt, stored_key, server_key, i = scramp.ScramMechanism(mechanism).make_auth_info(password, iterations,
                                                                                          salt)
        return cls(salt, stored_key, server_key, i)

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> "ScramCredential":
        """What AlterUserScramCredentials sends: the client salted the password (RFC 5802 Hi())."""
        hf = SCRAM_HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", hf).digest()
        server_key = hmac.new(salted_password, b"Server Key", hf).digest()
        return cls(salt, hf(client_key).digest(), server_key, iterations)

    def to_json(self) -> dict:
        enc = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {"salt": enc(self.salt), "stored_key": enc(self.stored_key), "server_key": enc(self.server_key),
                "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict) -> "ScramCredential":
        dec = base64.b64decode
        return cls(dec(d["salt"]), dec(d["stored_key"]), dec(d["server_key"]), int(d["iterations"]))


# A file's identity for "has it changed": a rewrite renames a new inode into place, so the inode tells
# two writes apart even within one tick of the file system's clock, with the same size.
Stamp = tuple[int, int, int]


def file_stamp(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def path_stamp(path: Path) -> Stamp | None:
    """The stamp of the file at `path`, None if there is none."""
    try:
        return file_stamp(path.stat())
    except FileNotFoundError:
        return None


class _WatchedFile:
    """A file re-parsed whenever it changes (another inode, modification time or size)."""

    def __init__(self, path: Path | None, parse) -> None:
        self.path, self.parse = path, parse
        self._stamp: Stamp | None = None
        self.value = parse(None)

    def get(self):
        if self.path is None:
            return self.value
        stamp = self._stat()
        if stamp != self._stamp:
            self.value = self.parse(self.path.read_text(encoding="utf-8") if stamp else None)
            self._stamp = stamp
        return self.value

    @property
    def stamp(self) -> Stamp | None:
        """The file's stamp when `value` was last read from it or written to it."""
        return self._stamp

    def written(self, stamp: Stamp | None = None) -> None:
        """The file now holds `value`, written by this process (its stamp then, if taken under the
        lock): no need to read it back."""
        self._stamp = self._stat() if stamp is None else stamp

    def _stat(self) -> Stamp | None:
        assert self.path is not None
        return path_stamp(self.path)


def _parse_scram(text: str | None) -> dict[str, dict[str, ScramCredential]]:
    if not text:
        return {}
    data = json.loads(text)
    return {user: {mech: ScramCredential.from_json(c) for mech, c in mechs.items()}
            for user, mechs in data.get("users", {}).items()}


def parse_plain_users(text: str | None) -> dict[str, str]:
    users: dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition("=")
        if sep and name.strip():
            users[name.strip()] = password
    return users


def scram_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / "security" / "scram-credentials.json"


class CredentialStore:
    def __init__(self, data_dir: str | Path, plain_users_file: str | None = None) -> None:
        self._scram_path = scram_path(data_dir)
        self._scram = _WatchedFile(self._scram_path, _parse_scram)
        self._plain = _WatchedFile(Path(plain_users_file) if plain_users_file else None, parse_plain_users)
        self._file: StateFile | None = None
        # AlterUserScramCredentials changes applied in memory whose write is asked for or under way:
        # meanwhile the memory is ahead of the file, which is not read back (the write merges it)
        self._unwritten: list[_Change] = []
        self._writing: _ScramWrite | None = None

    # --- lookups (authentication) ---
    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram_users().get(user, {}).get(mechanism)

    def check_plain(self, user: str, password: str) -> bool:
        expected = self._plain.get().get(user)
        # compare even for unknown users so the answer takes as long either way
        ok = hmac.compare_digest((expected or secrets.token_hex(8)).encode(), password.encode())
        return expected is not None and ok

    def scram_users(self) -> Mapping[str, Mapping[str, ScramCredential]]:
        """Every user's credentials by mechanism; read only (a change replaces a user's entry)."""
        return self._scram.value if self._unwritten else self._scram.get()

    # --- changes (AlterUserScramCredentials, `kbroker user add`) ---
    async def alter_scram(self, upserts: list[tuple[str, str, ScramCredential]],
                          deletions: list[tuple[str, str]]) -> None:
        """Apply the changes now; return once the file holding them is durable."""
        users = self.scram_users()
        assert isinstance(users, dict)
        _apply_to(users, upserts, deletions)
        self._unwritten.append((upserts, deletions))
        if self._file is None:
            self._file = StateFile(self._scram_path, self._capture, mode=0o600, written=self._written)
        await self._file.save()

    def apply_scram(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Apply the changes and write the file before returning, on this thread: for `kbroker user
        add` and the --dev-security users, before the broker serves. The file is read, changed and
        written under its lock, so a running broker's write is not lost to this one, nor this to it."""
        self._scram_path.parent.mkdir(parents=True, exist_ok=True)
        with held_for_rewrite(self._scram_path):
            users = self.scram_users()  # the file as it is now
            assert isinstance(users, dict)
            _apply_to(users, upserts, deletions)
            write_file_durably(self._scram_path, _render(users), 0o600)
            self._scram.written()

    def _capture(self) -> Callable[[], bytes]:
        self._writing = _ScramWrite(self._scram_path, self._scram.stamp, dict(self._scram.value),
                                    list(self._unwritten))
        return self._writing

    def _written(self, st: os.stat_result | None) -> None:
        """On the loop, after a write: its changes are on disk; if it had to merge another process's
        file, that file plus every change since is what the broker now serves. A write that failed
        (`st` None) leaves its changes served until the file changes, as they were, but never
        applied again over a file written since (its client was told it failed; a later `kbroker
        user add` of the same user must win)."""
        write = self._writing
        assert write is not None
        del self._unwritten[:len(write.changes)]
        if st is None:
            return
        if write.merged is not None:
            users = write.merged
            for change in self._unwritten:  # applied while it was being written
                _apply_to(users, *change)
            self._scram.value = users
        self._scram.written(file_stamp(st))


_Change = tuple[list[tuple[str, str, ScramCredential]], list[tuple[str, str]]]


def _apply_to(users: dict[str, dict[str, ScramCredential]], upserts: list[tuple[str, str, ScramCredential]],
              deletions: list[tuple[str, str]]) -> None:
    changed: dict[str, dict[str, ScramCredential]] = {}
    for user, mech in deletions:
        entry = changed.setdefault(user, dict(users.get(user, {})))
        entry.pop(mech, None)
    for user, mech, cred in upserts:
        changed.setdefault(user, dict(users.get(user, {})))[mech] = cred
    for user, entry in changed.items():  # each user's entry replaced, never changed: snapshots hold
        if entry:
            users[user] = entry
        else:
            users.pop(user, None)


class _ScramWrite:
    """The broker's credentials rendered for one write, on the `state-files` worker under the file's
    lock. If the file is no longer the one the broker last read or wrote (`kbroker user add` rewrote
    it), it is read again and the broker's unwritten changes applied on top (`merged`)."""

    def __init__(self, path: Path, known: Stamp | None, users: dict[str, dict[str, ScramCredential]],
                 changes: list[_Change]) -> None:
        self.path, self.known, self.users, self.changes = path, known, users, changes
        self.merged: dict[str, dict[str, ScramCredential]] | None = None

    def __call__(self) -> bytes:
        now = path_stamp(self.path)
        if now == self.known:
            return _render(self.users)
        users = _parse_scram(self.path.read_text(encoding="utf-8") if now is not None else None)
        for change in self.changes:
            _apply_to(users, *change)
        self.merged = users
        return _render(users)


def _render(users: dict[str, dict[str, ScramCredential]]) -> bytes:
    """The credentials file, one dumps() per user (a single call holds the GIL throughout)."""
    rows = (json.dumps(user) + ": " + json.dumps({m: c.to_json() for m, c in sorted(mechs.items())})
            for user, mechs in sorted(users.items()))
    return ('{"version": 1, "users": {\n' + ",\n".join(rows) + "\n}}\n").encode()


def add_plain_user(path: str | Path, user: str, password: str) -> None:
    """Add or replace one line of a PLAIN users file (`kbroker user add --mechanism PLAIN`; two at once
    each keep the other's line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with held_for_rewrite(path):
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        lines = [ln for ln in lines if ln.partition("=")[0].strip() != user]
        lines.append(f"{user}={password}")
        write_file_durably(path, ("\n".join(lines) + "\n").encode(), 0o600)
