"""Kafka's command-line tools run against any broker, as bin/kafka-*.sh runs them (tests/reference).

    from kbroker.tests.reference.tool_runner import run_tool

    out = run_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--list")
    out.returncode, out.stdout, out.stderr

A fresh JVM costs 1-2 s on this machine and the reference tests run a few hundred tools, so by default
each run happens in this process's ToolServer JVM (ToolServer.java beside this file): the tool's main()
with its own stdout, stderr and stdin, Kafka's Exit (and System.exit) ending the run with its code as
it would end a JVM, the shutdown hooks it added run at its end. `fresh_jvm=True`, or
KBROKER_TOOLS_FRESH_JVM=1 for every run, starts a JVM per run instead.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from kbroker.tests.reference.kafka import LIBS, java_command

# Kafka's config/tools-log4j2.yaml, which bin/kafka-*.sh use: warnings and errors on stderr.
TOOLS_LOG4J2 = """\
status = error
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = stderr
"""
# The same for the ToolServer JVM, whose console appender follows System.err as each run replaces it.
TOOLS_SERVER_LOG4J2 = TOOLS_LOG4J2.replace("appender.stderr.target = SYSTEM_ERR\n",
                                           "appender.stderr.target = SYSTEM_ERR\nappender.stderr.follow = true\n")


def tools_log4j() -> Path:
    """The tools' logging configuration (Kafka's tools-log4j2.yaml: WARN and above on stderr)."""
    path = LIBS.parent / "tools-log4j2.properties"
    if not path.exists() or path.read_text() != TOOLS_LOG4J2:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(TOOLS_LOG4J2)
        os.replace(tmp, path)
    return path


def run_tool(main_class: str, *args: str, timeout: float = 120.0, input: str | None = None,
             heap: str = "256m", fresh_jvm: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (by class name, e.g. `org.apache.kafka.tools.TopicCommand`)
    as its bin/kafka-*.sh script would, against any broker: its exit code, stdout and stderr as text.

    By default the run happens in this process's ToolServer JVM (the tool's main() with its own
    stdout, stderr and stdin, Kafka's Exit turned into its exit code), a few hundred milliseconds
    where a fresh JVM takes a second or two on this machine. `fresh_jvm=True` (or the environment's
    KBROKER_TOOLS_FRESH_JVM=1, for every run) starts a JVM for the run, as an operator's shell does;
    those share the classes the tools load through a class-data archive (AppCDS) the first run writes."""
    if not fresh_jvm and os.environ.get("KBROKER_TOOLS_FRESH_JVM") != "1":
        return tool_server().run(main_class, *args, timeout=timeout, input=input)
    command = java_command(main_class, *args, heap=heap, log4j=tools_log4j())
    sharing, dumped = _class_data_sharing()
    out = subprocess.run([command[0], *sharing, *command[1:]], capture_output=True, text=True, timeout=timeout,
                         input=input)
    if dumped is not None and dumped.exists():
        os.replace(dumped, dumped.with_name(dumped.name.split(".jsa.")[0] + ".jsa"))
    return out


class ToolServer:
    """One JVM that runs Kafka's tools one after another (tests/reference/ToolServer.java), started on
    first use and again after a run that hangs (the JVM is killed) or kills it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        classes = _compile_tool_server()
        log4j = LIBS.parent / "toolserver-log4j2.properties"
        if not log4j.exists() or log4j.read_text() != TOOLS_SERVER_LOG4J2:
            tmp = log4j.with_name(f"{log4j.name}.{os.getpid()}.tmp")
            tmp.write_text(TOOLS_SERVER_LOG4J2)
            os.replace(tmp, log4j)
        command = java_command("ToolServer", heap="512m", log4j=log4j, classpath=[classes])
        command.insert(1, "-Djava.security.manager=allow")  # ToolServer.java: System.exit ends a run, not the JVM
        stderr = open(LIBS.parent / "toolserver.log", "ab")  # what the JVM itself says (runs have their own)
        with stderr:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                    text=True, encoding="utf-8", bufsize=1, start_new_session=True)

    def run(self, main_class: str, *args: str, timeout: float = 120.0,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        request = json.dumps({"main": main_class, "args": list(args), "stdin": input or ""})
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            proc = self.proc
            assert proc.stdin is not None and proc.stdout is not None
            stdout = proc.stdout
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(stdout.readline()), daemon=True)
            try:
                proc.stdin.write(request + "\n")
                proc.stdin.flush()
                reader.start()
                reader.join(timeout)
            except OSError:
                pass
            if not answer or not answer[0]:
                self.stop()
                if reader.is_alive():
                    raise subprocess.TimeoutExpired([main_class, *args], timeout)
                raise RuntimeError(f"the tool server died running {main_class} {' '.join(args)}")
            out = json.loads(answer[0])
        return subprocess.CompletedProcess([main_class, *args], out["rc"], out["stdout"], out["stderr"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


_TOOL_SERVER: ToolServer | None = None


def tool_server() -> ToolServer:
    """This process's ToolServer (stopped when the process exits)."""
    global _TOOL_SERVER
    if _TOOL_SERVER is None:
        _TOOL_SERVER = ToolServer()
        atexit.register(_TOOL_SERVER.stop)
    return _TOOL_SERVER


def _compile_tool_server() -> Path:
    """ToolServer.java compiled against the reference jars into build/kafka/toolserver (again when the
    source is newer), under a lock: test workers start together."""
    source = Path(__file__).with_name("ToolServer.java")
    out = LIBS.parent / "toolserver"
    compiled = out / "ToolServer.class"
    out.mkdir(parents=True, exist_ok=True)
    with open(LIBS.parent / ".toolserver.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
            javac = shutil.which("javac") or "javac"
            done = subprocess.run([javac, "-nowarn", "-cp", f"{LIBS}/*", "-d", str(out), str(source)],
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"javac ToolServer.java failed:\n{done.stdout}\n{done.stderr}")
    return out


def _class_data_sharing() -> tuple[list[str], Path | None]:
    """JVM options that use the tools' class-data archive, or that write it at exit when there is none
    yet (returned as the second item, to be renamed into place). JVM logging is off so that an archive
    that does not fit (another JDK) never adds lines to a tool's output; the JVM then starts without it."""
    stamp = (LIBS / ".resolved").stat().st_mtime_ns
    archive = LIBS.parent / f"tools-{stamp}.jsa"
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:disable"], None
    dumped = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    return [f"-XX:ArchiveClassesAtExit={dumped}", "-Xlog:disable"], dumped
