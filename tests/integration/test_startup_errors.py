"""Start-up mistakes: each one is one line on stderr naming the option, variable, key, file or path,
a non-zero exit, and a data directory exactly as it was (nothing created, nothing rewritten).

Every case runs the real `kbroker serve` in a subprocess; the data directory is compared file by
file (names, sizes, contents, modification times) before and after.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import BrokerProcess, free_port

MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"


def snapshot(root: Path):
    if not root.exists() and not root.is_symlink():
        return None
    if root.is_file():
        return ("file", root.stat().st_size, root.stat().st_mtime_ns, hashlib.sha256(root.read_bytes()).hexdigest())
    out = [(".", root.stat().st_mtime_ns)]
    for path in sorted(root.rglob("*")):
        st = path.stat()
        rel = str(path.relative_to(root))
        if path.is_dir():
            out.append((rel, st.st_mtime_ns))
        else:
            out.append((rel, st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()))
    return out


def serve(data_dir: Path, *args: str, env: dict[str, str] | None = None, listen: bool = True,
          prefix: list[str] | None = None, preexec=None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KBROKER_")}
    full_env.update(env or {})
    listen_args = ["--listen", f"127.0.0.1:{free_port()}"] if listen else []
    cmd = [*(prefix or []), sys.executable, "-m", "kbroker", "serve", "--data-dir", str(data_dir),
           "--log-format", "json", *listen_args, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=60, preexec_fn=preexec)


def assert_refused(result: subprocess.CompletedProcess, *needles: str, absent: tuple[str, ...] = ()) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result
    assert len(lines) == 1, result.stderr
    assert result.stdout == "", result.stdout
    line = lines[0]
    assert line.startswith("kbroker: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    for needle in absent:
        assert needle not in line, (needle, line)
    return line


@pytest.fixture(scope="module")
def stored_dir(tmp_path_factory) -> Path:
    """A data directory a broker has used: meta.properties, topics/, partitions, a clean stop."""
    data = tmp_path_factory.mktemp("stored") / "data"
    with BrokerProcess(data, "--create-topics", "orders:2"):
        pass
    return data


def copy_of(stored_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(stored_dir, target)
    return target


def _case(data_dir: Path, run, *needles: str, absent: tuple[str, ...] = ()) -> str:
    before = snapshot(data_dir)
    line = assert_refused(run(), *needles, absent=absent)
    assert snapshot(data_dir) == before, "the data directory was touched"
    return line


# --- ports and addresses --------------------------------------------------------------------------------

@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


@pytest.mark.parametrize("fresh", [True, False])
def test_port_in_use(tmp_path, stored_dir, fresh) -> None:
    data = tmp_path / "data" if fresh else copy_of(stored_dir, tmp_path)
    with busy_port() as port:
        # and how to move: the flag, the variable and the make variable
        _case(data, lambda: serve(data, "--listen", f"127.0.0.1:{port}", listen=False),
              "--listen", f"127.0.0.1:{port}", "already in use", "--listen HOST:PORT", "KBROKER_LISTEN=HOST:PORT",
              "make run LISTEN=HOST:PORT")
    assert fresh is (not data.exists())


def test_second_listener_port_in_use(tmp_path) -> None:
    data = tmp_path / "data"
    with busy_port() as port:
        listeners = f"PLAINTEXT://127.0.0.1:{free_port()},INTERNAL://127.0.0.1:{port}"
        _case(data, lambda: serve(data, "--listeners", listeners, "--listener-security-protocol-map", MAP,
                                  listen=False),
              "--listeners", f"INTERNAL://127.0.0.1:{port}", "already in use", "change the port in --listeners")


def test_port_in_use_from_kafkas_variable_names_it(tmp_path) -> None:
    data = tmp_path / "data"
    with busy_port() as port:
        env = {"KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}"}
        _case(data, lambda: serve(data, env=env, listen=False), "KAFKA_LISTENERS", "already in use",
              "change the port in KAFKA_LISTENERS")


@pytest.mark.parametrize("args, needles", [
    (["--listen", "192.0.2.1:19092"], ["--listen", "192.0.2.1", "not an address of this machine"]),
    (["--listen", "nosuchhost.invalid:19092"], ["--listen", "nosuchhost.invalid", "cannot resolve"]),
    (["--listen", "127.0.0.1:99999"], ["--listen", "99999", "1-65535"]),
    (["--listen", "127.0.0.1:port"], ["--listen", "127.0.0.1:port"]),
    (["--listeners", "HTTP://127.0.0.1:19092"], ["--listeners", "HTTP", "listener-security-protocol-map"]),
    (["--listeners", "PLAINTEXT://0.0.0.0:19092"], ["--listeners", "0.0.0.0"]),
    (["--listeners", "PLAINTEXT://127.0.0.1:19092", "--advertised-listeners", "PLAINTEXT://0.0.0.0:19092"],
     ["--advertised-listeners", "0.0.0.0"]),
    (["--listeners", "PLAINTEXT://127.0.0.1:19092", "--advertised-listeners", "INTERNAL://kbroker:29092",
      "--listener-security-protocol-map", MAP], ["--advertised-listeners", "INTERNAL://kbroker:29092"]),
    (["--listeners", "PLAINTEXT://127.0.0.1"], ["--listeners", "PLAINTEXT://127.0.0.1", "port"]),
    (["--listeners", "SSL://127.0.0.1:19093"], ["--ssl-keystore-location", "SSL", "certificate"]),
], ids=["not-ours", "unresolvable", "port-range", "port-word", "unknown-scheme", "advertise-wildcard", "advertised-wildcard",
        "advertised-unmatched", "missing-port", "ssl"])
def test_bad_listen_addresses(tmp_path, args, needles) -> None:
    data = tmp_path / "data"
    _case(data, lambda: serve(data, *args, listen=False), *needles)
    assert not data.exists()


# --- values -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (["--log-level", "loud"], ["--log-level", "loud"]),
    (["--num-partitions", "-1"], ["--num-partitions", "-1"]),
    (["--num-partitions", "two"], ["--num-partitions", "two"]),
    (["--node-id", "-3"], ["--node-id", "-3"]),
    (["--offsets-topic-num-partitions", "0"], ["--offsets-topic-num-partitions", "0"]),
    (["--shutdown-timeout-s", "soon"], ["--shutdown-timeout-s", "soon"]),
    (["--create-topics", "orders:-2"], ["--create-topics", "orders:-2"]),
], ids=["log-level", "negative", "non-integer", "node-id", "zero", "float", "create-topics"])
def test_bad_flag_values(tmp_path, stored_dir, args, needles) -> None:
    data = copy_of(stored_dir, tmp_path)
    _case(data, lambda: serve(data, *args), *needles)


def test_bad_value_in_environment_names_the_variable(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    _case(data, lambda: serve(data, env={"KBROKER_NUM_PARTITIONS": "-1"}), "KBROKER_NUM_PARTITIONS", "-1",
          absent=("--num-partitions",))
    _case(data, lambda: serve(data, env={"KBROKER_LOG_LEVEL": "loud"}), "KBROKER_LOG_LEVEL", "loud",
          absent=("--log-level",))


def test_bad_value_in_toml_names_the_key_and_file(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    toml = tmp_path / "kbroker.toml"
    toml.write_text('log_level = "info"\n"num.partitions" = -4\n')
    _case(data, lambda: serve(data, "--config", str(toml)), f"num.partitions in {toml}", "-4",
          absent=("--num-partitions",))


def test_broken_toml_names_the_file_and_line(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    toml = tmp_path / "kbroker.toml"
    toml.write_text('log_level = "info"\nnode_id = 1\nlisteners = PLAINTEXT://x:1\n')
    _case(data, lambda: serve(data, "--config", str(toml)), str(toml), "line 3")


# --- the data directory -------------------------------------------------------------------------------

def test_data_dir_is_a_file(tmp_path) -> None:
    data = tmp_path / "data"
    data.write_text("not a directory\n")
    _case(data, lambda: serve(data), "--data-dir", str(data), "is a file")
    inner = data / "sub"
    _case(data, lambda: serve(inner), "--data-dir", str(data), "is a file")


def _drop_dac_override() -> None:
    # Root ignores file permissions through CAP_DAC_OVERRIDE; without it (and without
    # CAP_DAC_READ_SEARCH) root is held to the mode bits like the container's service user.
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP (needs CAP_SETPCAP)
            os._exit(_CANNOT_DROP)


_CANNOT_DROP = 77


@pytest.mark.parametrize("exists", [True, False])
def test_data_dir_not_writable(tmp_path, stored_dir, exists) -> None:
    """A host directory the broker's user cannot write (the container's uid 10001 on a root-owned
    bind mount): refused in one line."""
    parent = tmp_path / "host"
    parent.mkdir()
    data = parent / "data"
    if exists:
        shutil.copytree(stored_dir, data)
        data.chmod(0o555)
    else:
        parent.chmod(0o555)
    preexec = _drop_dac_override if os.geteuid() == 0 else None
    try:
        target = data if exists else parent
        before = snapshot(target)
        result = serve(data, preexec=preexec)
        if result.returncode == _CANNOT_DROP and not result.stderr:
            pytest.skip("running as root without CAP_SETPCAP: cannot give up CAP_DAC_OVERRIDE")
        assert_refused(result, "--data-dir", str(data), "not writable")
        assert snapshot(target) == before
    finally:
        data.chmod(0o755) if exists else parent.chmod(0o755)


def test_data_dir_on_a_read_only_filesystem(tmp_path, stored_dir) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    # A private mount namespace: a tmpfs holding a copy of a used data directory, remounted read-only.
    script = ('mount -t tmpfs -o size=64m tmpfs "$1" && cp -a "$2" "$1/data" && mount -o remount,ro "$1" '
              '&& shift 2 && exec "$@"')
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(mount), str(stored_dir)]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {probe.stderr.decode().strip()}")
    before = snapshot(stored_dir)
    result = serve(mount / "data", prefix=prefix)
    assert_refused(result, "--data-dir", str(mount / "data"), "read-only filesystem")
    assert snapshot(stored_dir) == before


def test_damaged_meta_properties_is_named(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    meta = data / "meta.properties"
    meta.write_text("cluster.id=\x00\x00garbage\n")
    _case(data, lambda: serve(data), str(meta), "damaged")
    meta.write_bytes(b"\xff\xfe\x00")
    _case(data, lambda: serve(data), str(meta), "damaged")
    meta.unlink()
    meta.mkdir()
    _case(data, lambda: serve(data), str(meta), "cannot read")


def test_data_dir_of_another_cluster(tmp_path, stored_dir) -> None:
    """The apache/kafka image's CLUSTER_ID must be the one the directory was formatted with."""
    data = copy_of(stored_dir, tmp_path)
    _case(data, lambda: serve(data, env={"CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qk"}), str(data / "meta.properties"),
          "MkU3OEVBNTcwNTJENDM2Qk", "CLUSTER_ID", "its own --data-dir")


def test_meta_properties_of_another_node(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    _case(data, lambda: serve(data, "--node-id", "7"), str(data / "meta.properties"), "node.id=1", "--node-id")


def test_second_broker_on_the_same_data_dir_is_refused(tmp_path, stored_dir) -> None:
    data = copy_of(stored_dir, tmp_path)
    with BrokerProcess(data) as first:
        names = sorted(p.name for p in data.rglob("*"))
        result = serve(data)
        assert_refused(result, "--data-dir", str(data), "in use by another kbroker", ".lock",
                       "--data-dir DIR", "KBROKER_DATA_DIR=DIR", "make run DATA_DIR=DIR")
        assert sorted(p.name for p in data.rglob("*")) == names
        assert first.probe()
    # once the first has stopped, the directory is free again
    with BrokerProcess(data):
        pass


def test_fresh_data_dir_is_not_an_unclean_shutdown(tmp_path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        (loaded,) = broker.events("logs_loaded")
        assert loaded["first_start"] is True and loaded["clean_shutdown"] is True
    broker.start()
    (loaded,) = broker.events("logs_loaded", start=2)
    assert loaded["first_start"] is False and loaded["clean_shutdown"] is True
    broker.kill()
    broker.start()
    (loaded,) = broker.events("logs_loaded", start=3)
    assert loaded["first_start"] is False and loaded["clean_shutdown"] is False
    broker.stop()
