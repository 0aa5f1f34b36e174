"""README's quick start, run as written (only the port changed) against a real broker."""

from __future__ import annotations

import re
import subprocess
import sys

from kbroker.tests.integration.broker_process import BrokerProcess
from kbroker.tests.integration.dockerfile import ROOT


def _blocks(lang: str) -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def test_python_quick_start(tmp_path) -> None:
    (code,) = _blocks("python")
    with BrokerProcess(tmp_path / "data") as broker:
        out = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:9092", broker.bootstrap)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "b'id-1' b'10.00'"


def test_kcat_quick_start(tmp_path) -> None:
    import shutil

    import pytest

    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (make system-deps)")
    (shell,) = [b for b in _blocks("sh") if "kcat" in b]
    with BrokerProcess(tmp_path / "data") as broker:
        script = shell.replace("127.0.0.1:9092", broker.bootstrap).replace(".venv/bin/kbroker",
                                                                           f"{sys.executable} -m kbroker")
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == "hello"
        assert "answered ApiVersions" in out.stdout
