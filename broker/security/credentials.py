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

Damage (issue 38). The SCRAM file is a version-2 state file (broker/storage/state_file.py): one user
per line, each with its CRC32C. A user whose entry fails its checksum or no longer parses is not
loaded: nobody authenticates with credentials that may have been altered (a flipped bit in a name
would otherwise let a password log in as another principal), every other user is unaffected, and
`scram_credentials_damaged` (error) names what was refused and what to do; the next change of any
user rewrites the file without the damaged entries. A PLAIN users file that `kbroker user add` wrote
ends with a `# kbroker crc32c=...` line over the lines before it: on a mismatch no PLAIN user is
accepted from it (`plain_users_file_damaged`), since which line changed cannot be told; a file
without that line (written by hand, as Kafka's JAAS users are) is read as before, and so is a SCRAM
file from before checksums. A broker never fails to start over either file.

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
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from ..storage.log.files import held_for_rewrite, write_file_durably
from ..storage.state_file import StateFile, read_rows, render_rows, seal_text, unseal_text

log = structlog.get_logger("kbroker.credentials")

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
            self.value = self.parse(_read(self.path) if stamp else None)
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


def _read(path: Path) -> bytes | None:
    """The file's bytes; None if it is gone. A file that cannot be read is damage, reported by the
    parser it reaches as an empty, unverifiable file, never a failed authentication's traceback."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.error("credentials_file_unreadable", file=str(path), error=repr(exc),
                  detail="no user of this file can authenticate until it can be read")
        return b"\x00unreadable"


class ScramUsers(dict[str, dict[str, ScramCredential]]):
    """The SCRAM file's users by name, and the names of the entries refused as damaged (as far as a
    damaged entry still says its name)."""

    damaged: frozenset[str] = frozenset()


def _legacy_scram_rows(data: Any) -> list[dict[str, Any]]:
    """A file from before checksums (version 1: users by name)."""
    return [{"user": user, "credentials": mechs} for user, mechs in data.get("users", {}).items()]


def _parse_scram(raw: bytes | None, path: Path | None = None) -> ScramUsers:
    users = ScramUsers()
    if not raw:
        return users
    read = read_rows(raw, "users", _legacy_scram_rows)
    reasons, names = read.reasons(), {str(d.body["user"]) for d in read.damage
                                      if d.body is not None and "user" in d.body}
    for row in read.rows:
        try:
            users[str(row["user"])] = {str(m): ScramCredential.from_json(c) for m, c in row["credentials"].items()}
        except Exception as exc:  # noqa: BLE001 - an entry whose checksum holds but whose content is not ours
            reasons.append(f"user {row.get('user')!r}: {exc!r}")
            names.add(str(row.get("user")))
    if reasons:
        users.damaged = frozenset(names)
        log.error("scram_credentials_damaged", file=str(path) if path else None, users=sorted(names),
                  damage=reasons[:20], damaged_places=len(reasons),
                  detail="these entries are refused: their users cannot authenticate with SCRAM until their "
                         "credentials are set again (kbroker user add NAME, or AlterUserScramCredentials, e.g. "
                         "kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users "
                         "--entity-name NAME); every other user is unaffected. The next change of any user "
                         "rewrites the file without the damaged entries; a backup put in its place is read at once")
    return users


# A PLAIN users file that `kbroker user add` wrote ends with a checksum line (state_file.seal_text).
_PLAIN_SEAL_NOTE = "of the lines above; after editing this file by hand, delete this line"


class PlainUsers(dict[str, str]):
    damaged = False  # the file failed its checksum: no user of it is accepted


def _parse_plain_file(raw: bytes | None, path: Path | None = None) -> PlainUsers:
    if not raw:
        return PlainUsers()
    text, damage = unseal_text(raw.decode("utf-8", "replace"))
    if damage is None:
        return PlainUsers(parse_plain_users(text))
    log.error("plain_users_file_damaged", file=str(path) if path else None, damage=damage,
              users=len(parse_plain_users(text)),
              detail="no PLAIN user of this file can authenticate: which line changed cannot be told. If you "
                     "edited the file by hand, delete its last line ('# kbroker crc32c=...'); otherwise restore it "
                     "from a backup. The file is read again as soon as it changes")
    refused = PlainUsers()
    refused.damaged = True
    return refused


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
        self._scram = _WatchedFile(self._scram_path, lambda raw: _parse_scram(raw, self._scram_path))
        plain = Path(plain_users_file) if plain_users_file else None
        self._plain = _WatchedFile(plain, lambda raw: _parse_plain_file(raw, plain))
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

    def load(self) -> None:
        """Read both files now (at start-up), so damage is reported then, not at the first login."""
        self.scram_users()
        self._plain.get()

    def refusal(self, user: str) -> str:
        """What an authentication failure's log says of a user with no credential to check against."""
        damaged: frozenset[str] = getattr(self._scram.value, "damaged", frozenset())
        return "the user's stored SCRAM credentials are damaged (scram_credentials_damaged)" if user in damaged \
            else "unknown user"

    def plain_refusal(self) -> str | None:
        """Why a PLAIN login failed, when it is not the password: the file is refused as damaged."""
        return "the PLAIN users file is damaged (plain_users_file_damaged)" if self._plain.value.damaged else None

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
        users = _parse_scram(_read(self.path) if now is not None else None, self.path)
        for change in self.changes:
            _apply_to(users, *change)
        self.merged = users
        return _render(users)


def _render(users: Mapping[str, Mapping[str, ScramCredential]]) -> bytes:
    """The credentials file: one checksummed entry per user (broker/storage/state_file.py)."""
    return render_rows("users", ({"user": user, "credentials": {m: c.to_json() for m, c in sorted(mechs.items())}}
                                 for user, mechs in sorted(users.items())))


class PlainUsersFileDamaged(Exception):
    """`kbroker user add --mechanism PLAIN` on a file whose checksum line does not match its lines."""


def add_plain_user(path: str | Path, user: str, password: str) -> None:
    """Add or replace one line of a PLAIN users file (`kbroker user add --mechanism PLAIN`; two at once
    each keep the other's line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with held_for_rewrite(path):
        text, damage = unseal_text(path.read_text(encoding="utf-8", errors="replace") if path.exists() else "")
        if damage is not None:  # sealing it again would bless whatever changed
            raise PlainUsersFileDamaged(f"{path}: {damage}. If you edited it by hand, delete its last line "
                                        f"('# kbroker crc32c=...') and run this again; otherwise restore it")
        lines = [ln for ln in text.splitlines() if ln.partition("=")[0].strip() != user]
        lines.append(f"{user}={password}")
        write_file_durably(path, seal_text("".join(line + "\n" for line in lines), _PLAIN_SEAL_NOTE), 0o600)
