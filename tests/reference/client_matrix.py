"""The client matrix (issue 37, level 2 of the differential checks): real clients run the same scenarios
against Apache Kafka 4.4 and against kbroker, and what they observe is compared.

Each client is one program with subcommands (tests/clients/java: the Java client and Kafka Streams 4.4;
tests/clients/franz: franz-go; tests/clients/sarama: IBM/sarama), started once per broker with the list of
scenarios; it prints one JSON line per scenario, `{"scenario": NAME, "observed": {...}}` (or `"error"`),
where the observations already leave out what must differ (member ids, timings) and name topics and groups
relative to the run's prefix. Here they are flattened into checks, `CLIENT/SCENARIO/KEY`, and compared;
a check that differs is either listed in tests/reference/differences/clients.toml with its reason, or a
defect. The programs are built here into build/clients/ (Java with javac against build/kafka/libs, Go with
Go 1.26, `$GO` or /usr/local/go/bin/go) and rebuilt when their sources change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "tests" / "clients"
BUILD = ROOT / "build" / "clients"
DIFFERENCES = Path(__file__).resolve().parent / "differences" / "clients.toml"
REPORT = ROOT / "build" / "differential" / "clients.json"
GO = os.environ.get("GO", "/usr/local/go/bin/go")
RUN_TIMEOUT_S = 900


def _digest(paths: list[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for item in extra:
        h.update(item.encode() + b"\0")
    return h.hexdigest()[:16]


def _publish(tmp: Path, final: Path) -> Path:
    """Move a finished build into place (another process may have made the same one meanwhile)."""
    try:
        tmp.rename(final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# The Java programs' log4j2 configuration: warnings and errors on stderr (each run's log).
LOG4J_STDERR = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %c: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


def java_classes(libs: Path) -> Path:
    """tests/clients/java compiled with javac against Kafka's jars into build/clients/java/<digest>."""
    sources = sorted((CLIENTS / "java").glob("*.java"))
    javac = shutil.which("javac") or "javac"
    jars = sorted(p.name for p in libs.glob("*.jar"))
    final = BUILD / "java" / _digest(sources, *jars)
    if final.is_dir():
        return final
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([javac, "-nowarn", "-d", str(tmp), "-cp", f"{libs}/*", *map(str, sources)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"javac failed:\n{out.stdout}\n{out.stderr}")
    return _publish(tmp, final)


def go_env() -> dict[str, str]:
    """The environment for Go builds: modules on, the toolchain we name (no automatic toolchain download), go.sum
    as committed, no version-control stamp (a clone's git may refuse a tree it does not own)."""
    return dict(os.environ, GO111MODULE="on", GOTOOLCHAIN="local", GOFLAGS="-mod=readonly -buildvcs=false")


def go_binary(name: str) -> Path:
    """tests/clients/<name> (a Go module) built with Go 1.26 into build/clients/go/<name>-<digest>."""
    module = CLIENTS / name
    sources = [*module.glob("*.go"), module / "go.mod", module / "go.sum"]
    version = subprocess.run([GO, "version"], capture_output=True, text=True, check=True).stdout.strip()
    final = BUILD / "go" / f"{name}-{_digest(sources, version)}"
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    out = subprocess.run([GO, "build", "-trimpath", "-o", str(tmp), "."], cwd=module, env=go_env(),
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"go build of {name} failed:\n{out.stdout}\n{out.stderr}")
    os.replace(tmp, final)
    return final


def require_go() -> None:
    """Skip a test that needs Go 1.26 when it is missing; under `make test` (KBROKER_REQUIRE_GO=1) fail."""
    import pytest

    why = go_available()
    if why is not None:
        if os.environ.get("KBROKER_REQUIRE_GO") == "1":
            pytest.fail(why)
        pytest.skip(why)


def go_available() -> str | None:
    """None when Go 1.26 can build here, else why not."""
    if not Path(GO).exists() and shutil.which(GO) is None:
        return f"Go is missing ({GO}; set GO=)"
    version = subprocess.run([GO, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    major_minor = tuple(int(x) for x in version.removeprefix("go").split(".")[:2] if x.isdigit())
    if major_minor < (1, 24):
        return f"{GO} is {version}; the Go clients need Go 1.24 or later (1.26 here)"
    return None


def run_scenarios(command: list[str], bootstrap: str, prefix: str, scenarios: list[str],
                  log: Path) -> dict[str, dict[str, Any]]:
    """Run one client program against one broker; scenario -> {"observed": ...} or {"error": ...}."""
    with open(log, "w") as err:
        out = subprocess.run([*command, bootstrap, prefix, *scenarios], stdout=subprocess.PIPE, stderr=err,
                             text=True, timeout=RUN_TIMEOUT_S)
    results: dict[str, dict[str, Any]] = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            results[item.pop("scenario")] = item
    for name in scenarios:
        if name not in results:
            tail = log.read_text(errors="replace")[-3000:]
            results[name] = {"error": f"no result (exit {out.returncode}); stderr ends:\n{tail}"}
    return results


def flatten(client: str, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """CLIENT/SCENARIO/KEY -> value, for the scenarios that ran."""
    checks: dict[str, Any] = {}
    for scenario, result in results.items():
        for key, value in (result.get("observed") or {}).items():
            checks[f"{client}/{scenario}/{key}"] = value
    return checks


@dataclass
class Listed:
    check: str
    kafka: Any
    kbroker: Any
    reason: str
    issue: str
    kind: str = "deliberate"  # or "defect": a known defect of kbroker, listed until its issue fixes it


def listed_differences(path: Path = DIFFERENCES) -> dict[str, Listed]:
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out: dict[str, Listed] = {}
    for item in doc.get("difference", []):
        listed = Listed(item["check"], item.get("kafka"), item.get("kbroker"), item["reason"], item["issue"],
                        item.get("kind", "deliberate"))
        assert listed.kind in ("deliberate", "defect"), f"{listed.check}: kind is deliberate or defect"
        assert listed.check not in out, f"{listed.check} is listed twice in {path.name}"
        assert listed.reason.strip(), f"{listed.check} in {path.name} has no reason"
        out[listed.check] = listed
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class Matrix:
    """What every client observed on both brokers; writes build/differential/clients.json."""

    prefix: str = field(default_factory=lambda: "cm" + uuid.uuid4().hex[:8])
    kafka: dict[str, Any] = field(default_factory=dict)
    kbroker: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)  # client/scenario -> broker -> ok|error

    def run(self, client: str, command: list[str], scenarios: list[str], brokers: dict[str, str],
            logs: Path) -> dict[str, dict[str, dict[str, Any]]]:
        """Run the client against each broker at once (kafka and kbroker: bootstrap), each in its own prefix
        namespace so the shared reference broker never sees a name twice."""
        with ThreadPoolExecutor(len(brokers)) as pool:
            futures = {label: pool.submit(run_scenarios, command, bootstrap, f"{self.prefix}{client[:2]}",
                                          scenarios, logs / f"{client}-{label}.log")
                       for label, bootstrap in brokers.items()}
            results = {label: f.result() for label, f in futures.items()}
        for label, per_scenario in results.items():
            getattr(self, label).update(flatten(client, per_scenario))
            for scenario, result in per_scenario.items():
                self.outcomes.setdefault(f"{client}/{scenario}", {})[label] = "error" if "error" in result else "ok"
        return results

    def differences(self, client: str | None = None) -> dict[str, tuple[Any, Any]]:
        keys = set(self.kafka) | set(self.kbroker)
        out = {}
        for key in sorted(keys):
            if client is not None and not key.startswith(client + "/"):
                continue
            a, b = self.kafka.get(key, "<missing>"), self.kbroker.get(key, "<missing>")
            if _canonical(a) != _canonical(b):
                out[key] = (a, b)
        return out

    def report(self, listed: dict[str, Listed]) -> dict[str, Any]:
        differences = self.differences()
        checks = set(self.kafka) | set(self.kbroker)
        deliberate = [vars(listed[k]) | {"kafka": a, "kbroker": b} for k, (a, b) in differences.items()
                      if k in listed and listed[k].kind == "deliberate"]
        # known defects (listed with kind = "defect") and any difference not listed at all
        defects = [vars(listed[k]) | {"kafka": a, "kbroker": b} if k in listed else {"check": k, "kafka": a, "kbroker": b}
                   for k, (a, b) in differences.items() if k not in listed or listed[k].kind == "defect"]
        return {"level": "clients", "checks": len(checks), "equal": len(checks) - len(differences),
                "deliberate": deliberate, "defects": defects, "scenarios": self.outcomes}

    def write(self, listed: dict[str, Listed], path: Path = REPORT) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.report(listed), indent=2, sort_keys=False) + "\n")
        os.replace(tmp, path)
