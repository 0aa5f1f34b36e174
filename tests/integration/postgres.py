"""A scratch PostgreSQL server for the tests of kbroker over PostgreSQL (issue 44).

Debian's PostgreSQL 15 (the `postgresql` package `make test` installs): `initdb` into a scratch
directory, `postgres` on a free loopback port with its unix socket in that directory, stopped and the
directory removed at the end. `initdb` refuses root, so as root every PostgreSQL command runs as the
`postgres` user on a directory it owns. Password authentication (scram-sha-256) over TCP, as a
deployment has it, so a wrong password is refused as it would be there; trust over the socket for the
fixture's own administration.

Absent PostgreSQL skips the test with its reason, except under `make test` (KBROKER_REQUIRE_POSTGRES=1),
where it fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from kbroker.tests.integration.broker_process import free_port

PG_BIN = Path(os.environ.get("KBROKER_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"
START_TIMEOUT_S = 60.0


def postgres_missing() -> str | None:
    """Why no scratch PostgreSQL can run here, or None."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        return f"PostgreSQL is not installed ({PG_BIN}/initdb missing): `make test` installs Debian's postgresql"
    if shutil.which("psql") is None:
        return "psql is missing (Debian's postgresql-client)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` user to run initdb as"
    return None


def require_postgres() -> None:
    import pytest

    reason = postgres_missing()
    if reason is not None:
        if os.environ.get("KBROKER_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


class PostgresServer:
    """One PostgreSQL server on a free port; `url(...)` names a database on it."""

    def __init__(self) -> None:
        self.password = uuid.uuid4().hex
        self.port = free_port()
        self.base = Path(tempfile.mkdtemp(prefix="kbroker-pg-"))
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.log_file = self.base / "postgres.log"
        self._as_root = os.geteuid() == 0
        self.listen_addresses = ["127.0.0.1"]  # more (a bridge's address) with `listen_also` before start()
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        os.chmod(self.base, 0o700)

    def _run(self, *args: str, timeout: float = START_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess:
        command = list(args)
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.base)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out

    def init(self) -> None:
        pwfile = self.base / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", SUPERUSER, f"--pwfile={pwfile}",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions")
        pwfile.unlink()

    def listen_also(self, address: str, network: str) -> None:
        """Before start(): listen on `address` as well, and take password logins from `network` (a CIDR:
        the nodes in network namespaces of tests/integration/netns.py)."""
        self.listen_addresses.append(address)
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {network} scram-sha-256\n")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.socket_dir} -c listen_addresses={','.join(self.listen_addresses)} -c fsync=on "
                   f"-c synchronous_commit=on -c max_connections=100 -c shared_buffers=32MB")
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_file), "-o", options,
                  "-w", "-t", str(int(START_TIMEOUT_S)), "start")

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop -m fast|immediate (immediate: as a crash, recovery at the next start)."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", str(int(START_TIMEOUT_S)),
                  "stop", check=False)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL as the superuser over the unix socket; returns psql's unaligned output."""
        out = self._run("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir),
                        "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql, timeout=60)
        return out.stdout.strip()

    def hold(self, database: str, select: str) -> RowHold:
        """A session holding the rows `select` names (FOR UPDATE) from when this returns until its
        release(): a database too slow to answer, for as long as a test needs, not for a time."""
        command = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir),
                   "-p", str(self.port), "-U", SUPERUSER, "-d", database]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return RowHold(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=self.base), select)

    def create_database(self, name: str | None = None, owner: str = SUPERUSER) -> str:
        name = name or f"kb_{uuid.uuid4().hex[:12]}"
        self.psql(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return name

    def create_role(self, name: str, password: str) -> None:
        self.psql(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")

    def url(self, database: str, user: str = SUPERUSER, password: str | None = None, port: int | None = None,
            host: str = "127.0.0.1") -> str:
        secret = self.password if password is None else password
        return f"postgresql://{user}:{secret}@{host}:{port or self.port}/{database}"

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


class RowHold:
    """psql reading its statements from a pipe: an open transaction that has locked rows."""

    def __init__(self, proc: subprocess.Popen, select: str) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"BEGIN; {select} FOR UPDATE; SELECT 'held';\n")
        proc.stdin.flush()
        while (line := proc.stdout.readline()) and line.strip() != "held":
            pass
        assert line, f"the session ended before it held the rows of {select!r}"

    def release(self) -> None:
        """Commit (the rows go free) and end the session; again is nothing."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("COMMIT;\n")
            self.proc.stdin.close()
            self.proc.wait(30)


def start_postgres(listen: tuple[str, str] | None = None) -> PostgresServer:
    """`listen`: (address, network) to listen on as well (PostgresServer.listen_also)."""
    server = PostgresServer()
    try:
        server.init()
        if listen is not None:
            server.listen_also(*listen)
        server.start()
    except BaseException:
        log = server.log_file.read_text(errors="replace")[-2000:] if server.log_file.exists() else ""
        server.stop("immediate")
        server.remove()
        if log:
            raise RuntimeError(f"PostgreSQL did not start; its log ends: {log}") from None
        raise
    return server


def wait_for_file_text(path: Path, needle: str, timeout_s: float) -> bool:
    """Bounded wait for `needle` to appear in a log file."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False
