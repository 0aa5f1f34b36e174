"""`kbroker analyze --master spark://...` against a standalone Spark master and one small worker.

The pip package has no sbin scripts, so the daemons are started with `spark-class` on 127.0.0.1 and free
ports; the worker gets one core. The job runs as the real CLI in a subprocess (its own driver).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import free_port

pytestmark = pytest.mark.slow


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, SPARK_LOG_DIR=str(tmp_path),
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_DAEMON_MEMORY="256m")
    return env


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json", timeout=5) as response:
        return json.load(response)


@pytest.fixture
def standalone(tmp_path):
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = _env(tmp_path)
    logs = []
    procs = []

    def start(name: str, *args: str) -> None:
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen([str(_spark_class()), *args], stdout=log, stderr=subprocess.STDOUT, env=env))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        start("worker", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
              "--cores", "1", "--memory", "768m", "--webui-port", str(worker_ui), "--work-dir", str(tmp_path / "work"))
        deadline = time.monotonic() + 90
        while True:
            try:
                if [w for w in _master_state(ui).get("workers", []) if w.get("state") == "ALIVE"]:
                    break
            except (OSError, ValueError):  # not listening yet, or a page that is not the master's JSON yet
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                text = "\n".join((tmp_path / f"{n}.log").read_text(errors="replace")[-3000:] for n in ("master", "worker"))
                pytest.fail(f"standalone cluster did not come up:\n{text}")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()


def test_analyze_runs_on_a_standalone_master_and_worker(standalone, scenario, spark, tmp_path) -> None:
    master, ui = standalone
    out = tmp_path / "report"
    env = _env(tmp_path)
    # the worker has 768 MB: executors must ask for less than the 1 GB default
    env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.executor.memory=512m --conf spark.ui.enabled=false pyspark-shell"
    proc = subprocess.run([sys.executable, "-m", "kbroker", "analyze", "--data-dir", str(scenario.root),
                           "--out", str(out), "--master", master], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"wrote {out}" in proc.stdout
    assert master in (out / "report.html").read_text()
    apps = _master_state(ui)
    assert [a["name"] for a in apps.get("completedapps", [])] == ["kbroker-analyze"]
    rows = spark.read.parquet(str(out / "offsets_latest")).collect()
    assert {(r.group_id, r.topic, r.partition): r.committed_offset for r in rows} == scenario.latest
