"""`kbroker analyze --master spark://...` on a standalone cluster of a master and two workers, each its own
process, started by the test with the package's `spark-class`.

The cluster lives in a network namespace of its own, reached over a veth pair (10.x.y.1 here, 10.x.y.2
there), so nothing can pass through loopback: a driver or a daemon that advertised `localhost` or
127.0.0.1 would leave the executors connecting to their own namespace's loopback, and the job would fail.
SPARK_LOCAL_IP is unset everywhere; the driver is told its address as a user would tell it
(spark.driver.host). The executors run the workers' `python3` (a wrapper first on the workers' PATH,
which hides this checkout's editable install), so they can import kbroker only from the zip the job
ships: the driver bakes in neither its Python path nor its package. Needs root (ip netns), as CI has.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kbroker.tests.integration.broker_process import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# Run by the executors' Python before anything else: without the editable install's finder, kbroker can
# only come from the zip the driver ships (spark.submit.pyFiles / addPyFile).
SITECUSTOMIZE = """\
import sys
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]
sys.path_hooks[:] = [h for h in sys.path_hooks if 'editable' not in getattr(h, '__module__', '')]
sys.path[:] = [p for p in sys.path if '__editable__' not in p]
for name in [m for m in sys.modules if m == 'kbroker' or m.startswith('kbroker.')]:
    del sys.modules[name]
"""


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Namespace:
    """A network namespace joined to ours by a veth pair: HOST here, PEER there."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 10000}{random.randrange(100, 999)}"
        self.name = f"kbspark{tag}"
        self.outer, self.inner = f"vkb{tag}a", f"vkb{tag}b"
        net = f"10.{random.randrange(200, 250)}.{random.randrange(0, 255)}"
        self.host, self.peer = f"{net}.1", f"{net}.2"

    def __enter__(self) -> Namespace:
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
            _ip("link", "set", self.inner, "netns", self.name)
            _ip("addr", "add", f"{self.host}/30", "dev", self.outer)
            _ip("link", "set", self.outer, "up")
            for args in (("addr", "add", f"{self.peer}/30", "dev", self.inner), ("link", "set", self.inner, "up"),
                         ("link", "set", "lo", "up")):
                _ip("netns", "exec", self.name, "ip", *args)
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)

    def command(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]


def _can_make_namespaces() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _master_state(host: str, ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://{host}:{ui_port}/json", timeout=5) as response:
        return json.load(response)


def _worker_env(tmp_path: Path) -> dict[str, str]:
    """The workers' environment: their own python3 first on PATH, no SPARK_LOCAL_IP, no PYSPARK_PYTHON."""
    bin_dir = tmp_path / "worker-bin"
    hide = tmp_path / "worker-site"
    bin_dir.mkdir(parents=True)
    hide.mkdir(parents=True)
    (hide / "sitecustomize.py").write_text(SITECUSTOMIZE)
    wrapper = bin_dir / "python3"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={hide}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS",
                        "PYTHONPATH")}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", SPARK_LOG_DIR=str(tmp_path),
               SPARK_DAEMON_MEMORY="256m")
    return env


@pytest.fixture
def cluster(tmp_path):
    if not _can_make_namespaces():
        pytest.skip("needs root and iproute2 (ip netns) for the cluster's network namespace, as CI has")
    port, ui = free_port(), free_port()
    env = _worker_env(tmp_path)
    logs, procs = [], []
    with Namespace() as ns:
        def start(name: str, *args: str) -> None:
            log = open(tmp_path / f"{name}.log", "wb")
            logs.append(log)
            procs.append(subprocess.Popen(ns.command(str(_spark_class()), *args), stdout=log,
                                          stderr=subprocess.STDOUT, env=env))

        try:
            start("master", "org.apache.spark.deploy.master.Master", "--host", ns.peer, "--port", str(port),
                  "--webui-port", str(ui))
            for i in (1, 2):
                start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", f"spark://{ns.peer}:{port}",
                      "--host", ns.peer, "--cores", "1", "--memory", "900m", "--webui-port", str(free_port()),
                      "--work-dir", str(tmp_path / f"work{i}"))
            deadline = time.monotonic() + 120
            while True:
                try:
                    alive = [w for w in _master_state(ns.peer, ui).get("workers", []) if w.get("state") == "ALIVE"]
                    if len(alive) == 2:
                        break
                except (OSError, ValueError):  # not listening yet
                    pass
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    text = "\n".join((tmp_path / f"{n}.log").read_text(errors="replace")[-3000:]
                                     for n in ("master", "worker1", "worker2"))
                    pytest.fail(f"standalone cluster did not come up:\n{text}")
                time.sleep(0.5)
            yield ns, f"spark://{ns.peer}:{port}", ui
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for log in logs:
                log.close()


def test_analyze_runs_on_two_workers_in_their_own_network(cluster, scenario, spark, tmp_path) -> None:
    ns, master, ui = cluster
    out = tmp_path / "report"
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    # This host's python3 is the workers' kind too (Spark plans the data source with it)
    env["PATH"] = _worker_env(tmp_path / "driver")["PATH"]
    # What a user on a multi-host cluster says: the driver's reachable address, executors that fit.
    env["PYSPARK_SUBMIT_ARGS"] = (f"--conf spark.driver.host={ns.host} --conf spark.driver.bindAddress={ns.host} "
                                  f"--conf spark.executor.memory=512m --conf spark.ui.enabled=false pyspark-shell")
    proc = subprocess.run([sys.executable, "-m", "kbroker", "analyze", "--data-dir", scenario.root.as_uri(),
                           "--out", str(out), "--master", master], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert f"wrote {out}" in proc.stdout
    assert master in (out / "report.html").read_text()
    state = _master_state(ns.peer, ui)
    apps = state.get("completedapps", [])
    assert [a["name"] for a in apps] == ["kbroker-analyze"]
    # both workers ran executors of the job (each worker keeps a folder per executor it ran)
    ran = [d for i in (1, 2) for d in (tmp_path / f"work{i}").glob("app-*/*")]
    assert len({p.parents[1].name for p in ran}) == 2, ran
    rows = spark.read.parquet(str(out / "offsets_latest")).collect()
    assert {(r.group_id, r.topic, r.partition): r.committed_offset for r in rows} == scenario.latest
    # the executors imported kbroker from the shipped zip, never from this checkout
    stderr = "".join(p.read_text(errors="replace") for p in (tmp_path / "work1").glob("app-*/*/stderr"))
    assert "ModuleNotFoundError" not in stderr
