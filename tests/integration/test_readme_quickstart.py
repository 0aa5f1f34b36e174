"""README's quick start, run as written against a broker `make run` started: the make line, then each
block in order (only the address changed, to a free port: `LISTEN` and `DATA_DIR` are the make
variables the README gives for that), and the busy-port advice it gives."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import free_port
from kbroker.tests.integration.dockerfile import ROOT

README_ADDRESS = "127.0.0.1:9092"


def _blocks(lang: str) -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def _make_run(line: str, *variables: str) -> list[str]:
    """The README's `make run ...` line with `variables` after it, run on this interpreter's
    environment as its .venv (never reinstalled by the test: `-o` keeps make from remaking it)."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "kbroker").exists():
        pytest.skip(f"{venv} has no kbroker command (install the package)")
    words = line.split(maxsplit=2)
    assert words[:2] == ["make", "run"], line
    rest = [w for w in re.findall(r'(\w+="[^"]*"|\S+)', words[2])] if len(words) > 2 else []
    return ["make", "--no-print-directory", "-C", str(ROOT), "-o", f"{venv}/.installed", "run",
            *[w.replace('"', "") for w in rest], f"VENV={venv}", *variables]


def _started(proc: subprocess.Popen, address: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while subprocess.run([sys.executable, "-m", "kbroker", "probe", address, "--timeout", "1"],
                         capture_output=True).returncode != 0:
        assert proc.poll() is None, f"make run exited with {proc.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"make run's broker did not answer:\n{log.read_text()}"
        time.sleep(0.2)


def _ctrl_c(proc: subprocess.Popen) -> None:
    """Ctrl-C, as the README says to stop it: SIGINT to make and the broker it runs."""
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(30)


def test_quick_start_as_written(tmp_path) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (make system-deps)")
    (make_block, kcat_block, cli_block) = _blocks("sh")
    (python_block,) = _blocks("python")
    address, data = f"127.0.0.1:{free_port()}", tmp_path / "data"
    log = tmp_path / "make-run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(_make_run(make_block.strip(), f"LISTEN={address}", f"DATA_DIR={data}"), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _started(proc, address, log)

        def run(script: str, *argv: str) -> str:
            script = script.replace(README_ADDRESS, address).replace(".venv/bin/kbroker", f"{sys.executable} -m kbroker")
            out = subprocess.run([*argv, script], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, f"{script}\n{out.stdout}\n{out.stderr}"
            return out.stdout

        kcat = run(kcat_block, "bash", "-euo", "pipefail", "-c").splitlines()
        assert kcat[0] == "hello" and any("3 partitions" in line and "orders" in line for line in kcat)
        assert any("answered ApiVersions" in line for line in kcat)
        assert run(python_block, sys.executable, "-c").strip() == "b'id-1' b'10.00'"
        cli = run(cli_block, "bash", "-euo", "pipefail", "-c")
        assert "Topic orders" in cli and "partitions 3" in cli and "Group demo" in cli and "payments" in cli

        # port 9092 taken: the advice the README gives works, and the broker says it too
        other = tmp_path / "data-2"
        busy = subprocess.run(_make_run("make run", f"LISTEN={address}", f"DATA_DIR={other}"), capture_output=True,
                              text=True, timeout=60)
        assert busy.returncode != 0 and "make run LISTEN=HOST:PORT" in busy.stderr, busy.stderr
        shared = subprocess.run(_make_run("make run", f"LISTEN=127.0.0.1:{free_port()}", f"DATA_DIR={data}"),
                                capture_output=True, text=True, timeout=60)
        assert shared.returncode != 0 and "make run DATA_DIR=DIR" in shared.stderr, shared.stderr
    finally:
        if proc.poll() is None:
            _ctrl_c(proc)
    assert '"event": "broker_stopped"' in log.read_text()  # stopped cleanly
