"""`kbroker`: serve, probe (a health check), and the commands later issues add."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import socket
import sys
import time

from .. import __version__
from .config import BrokerConfig, load_config, load_config_with_sources, parse_host_port
from .kafka_names import IMAGE_CONFIG_PATHS, kafka_name, variable_name


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="settings file: Kafka's server.properties, or TOML if it ends in .toml (KAFKA_* variables, "
                             "KBROKER_* variables and flags win over it, in that order); without it the apache/kafka "
                             f"image's paths are read if they exist ({', '.join(IMAGE_CONFIG_PATHS)})")
    for f in dataclasses.fields(BrokerConfig):
        flag = "--" + f.name.replace("_", "-")
        env = "KBROKER_" + f.name.upper()
        kafka = kafka_name(f.name)
        also = f", {variable_name(kafka)}" if kafka else ""
        default = "" if f.default is None else f"; default {f.default!r}"
        help_text = f"{f.metadata.get('help', '')} [env {env}{also}{default}]"
        if str(f.type).removesuffix(" | None") in ("bool", "<class 'bool'>"):
            parser.add_argument(flag, dest=f.name, default=None, action=argparse.BooleanOptionalAction, help=help_text)
        else:
            metavar = f.metadata.get("metavar") or f.name.split("_")[-1].upper()  # --num-partitions PARTITIONS
            parser.add_argument(flag, dest=f.name, default=None, metavar=metavar, help=help_text)


# The commands this module runs itself; any other (topic, group, test) is the admin CLI's, whose
# parser imports the admin client. Serving and probing never load it (start-up time, idle memory).
_OWN_COMMANDS = frozenset({"serve", "probe", "user", "analyze"})


class _Formatter(argparse.HelpFormatter):
    """argparse's, with the terminal width found as shutil.get_terminal_size finds it but without
    importing shutil (argparse makes a formatter per add_argument, and shutil's import, bz2 and lzma
    with it, was ~2 ms of every start)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:  # subparsers are made with the parent's class
        kwargs.setdefault("formatter_class", _Formatter)
        # No abbreviations: `--cluster postgresql://...` must not quietly set --cluster-id.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser(with_admin: bool = True) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kbroker",
        description="A Kafka-protocol broker with Kafka's consumer-group coordinator.",
    )
    parser.add_argument("--version", action="version", version=f"kbroker {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker", description="Run the broker in the foreground.")
    _add_config_flags(serve)
    probe = sub.add_parser("probe", help="ApiVersions round trip; exit 0 if the broker answers, 1 if not",
                           description="Health check: one ApiVersions round trip.")
    probe.add_argument("address", metavar="HOST:PORT", nargs="?",
                       help="default: the first configured listener (KBROKER_LISTENERS, KBROKER_LISTEN or --config), "
                            "on 127.0.0.1 when it listens on every interface")
    probe.add_argument("--config", metavar="FILE", help="TOML file to read the listener from")
    probe.add_argument("--timeout", type=float, default=3.0, help="seconds to wait (default 3)")
    probe.add_argument("--ready", action="store_true",
                       help="also require kbroker's /ready (every __consumer_offsets partition loaded, every "
                            "--create-topics topic present) on --admin-url")
    probe.add_argument("--admin-url", default=None,
                       help="kbroker's --metrics-listen endpoint (env KBROKER_ADMIN_URL; default: the one the broker "
                            "at HOST:PORT reports)")
    user = sub.add_parser("user", help="SASL users: `kbroker user add NAME ...`",
                          description="Manage SASL users (SCRAM credentials in the data directory, PLAIN users file).")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="add or replace a user's credential",
                              description="Add or replace a SCRAM credential (stored salted in "
                                          "<data-dir>/security/, read by a running broker too) or a PLAIN user.")
    add.add_argument("name")
    add.add_argument("--password", help="the password (default: KBROKER_USER_PASSWORD, else a line read from stdin)")
    add.add_argument("--mechanism", action="append", default=None,
                     choices=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"],
                     help="repeatable; default: SCRAM-SHA-256 and SCRAM-SHA-512")
    add.add_argument("--iterations", type=int, default=4096, help="SCRAM iterations (4096..16384)")
    add.add_argument("--data-dir", default="./data", help="the broker's data directory (default ./data)")
    add.add_argument("--plain-users-file", default=None, help="the PLAIN users file (needed for --mechanism PLAIN)")
    analyze = sub.add_parser(
        "analyze", help="PySpark analytics over a data directory (lag, commits, rebalances, topics)",
        description="Run the PySpark pipeline over a kbroker data directory and write Parquet tables and an "
                    "HTML report.",
    )
    analyze.add_argument("--data-dir", default="./data", help="kbroker data directory to read (default ./data)")
    analyze.add_argument("--out", default="./report", help="output directory (default ./report)")
    analyze.add_argument("--master", default=None,
                         help="Spark master URL, e.g. local[*] or spark://HOST:7077 (default: a local session)")
    analyze.add_argument("--since", default=None, help="only records at or after this time (ISO 8601 or epoch ms)")
    analyze.add_argument("--broker-log", default=None, metavar="FILE",
                         help="the broker's JSON log; rebalance reasons come from its rebalance_completed events")
    analyze.add_argument("--quiet", action="store_true", help="no progress lines")
    if with_admin:
        from ..admin.cli import register as register_admin  # topic, group, test (issue 16)

        register_admin(sub)
    return parser


def configured_address(config_file: str | None) -> str:
    """Where the broker configured by the environment (and file) listens: its first listener, so
    a health check follows the configured port."""
    listener = load_config({}, config_file).listener_set().bind[0]
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(listener.host, listener.host)
    return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"


def probe(address: str, timeout: float) -> int:
    from ..protocol import framing
    from ..protocol.frames import FrameReader, recv_frame
    from ..protocol.messages.api_versions_request import ApiVersionsRequest

    try:
        host, port = parse_host_port(address)
    except ValueError:
        print(f"kbroker probe: {address!r} is not HOST:PORT", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(framing.encode_request(18, 3, 1, "kbroker-probe", ApiVersionsRequest("kbroker-probe", "1")))
            _, body = framing.decode_response(18, 3, recv_frame(sock.recv, FrameReader()))
    except (OSError, ValueError) as e:
        print(f"kbroker probe {address}: {e}", file=sys.stderr)
        return 1
    if body.error_code != 0:
        print(f"kbroker probe {address}: error code {body.error_code}", file=sys.stderr)
        return 1
    print(f"ok: {address} answered ApiVersions with {len(body.api_keys)} APIs "
          f"in {1000 * (time.monotonic() - started):.1f} ms")
    return 0


def user_add(args: argparse.Namespace) -> int:
    import os

    from .storage.log.files import RewriteLockTimeout
    from .security.credentials import (
        MAX_ITERATIONS, MIN_ITERATIONS, CredentialStore, PlainUsersFileDamaged, ScramCredential, add_plain_user,
    )

    password = args.password or os.environ.get("KBROKER_USER_PASSWORD") or sys.stdin.readline().rstrip("\n")
    mechanisms = args.mechanism or ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    if not password:
        print("kbroker user add: empty password", file=sys.stderr)
        return 2
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        print(f"kbroker user add: --iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}", file=sys.stderr)
        return 2
    if "PLAIN" in mechanisms and not args.plain_users_file:
        print("kbroker user add: --mechanism PLAIN needs --plain-users-file", file=sys.stderr)
        return 2
    scram = [(args.name, m, ScramCredential.from_password(m, password, args.iterations))
             for m in mechanisms if m != "PLAIN"]
    written: list[str] = []
    try:
        if "PLAIN" in mechanisms:
            add_plain_user(args.plain_users_file, args.name, password)
            written.append("PLAIN")
        if scram:
            CredentialStore(args.data_dir).apply_scram(scram, [])
    except RewriteLockTimeout as e:  # a broker or another `user add` is rewriting the file and did not let go
        done = f" ({', '.join(written)} written)" if written else ""
        print(f"kbroker user add: {e}{done}; try again", file=sys.stderr)
        return 1
    except PlainUsersFileDamaged as e:
        print(f"kbroker user add: {e}", file=sys.stderr)
        return 1
    print(f"user {args.name}: {', '.join(mechanisms)}")
    return 0


def _import_structlog_without_rich() -> None:
    """structlog imports rich, when it is installed, only to draw console tracebacks. The broker does
    not depend on rich (an installed wheel has none) and importing it costs more start-up time and
    memory than the rest of structlog, so a broker serves as the installed wheel does: plain
    tracebacks, whatever else the environment holds."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), None)
    if command == "serve":
        # Start-up makes only long-lived objects (modules, classes, the broker): the cyclic collector's
        # passes over them find nothing to free and were ~10 ms of an empty start-up. process.serve turns
        # it back on once the listeners are up.
        gc.disable()
        _import_structlog_without_rich()
    args = build_parser(with_admin=command not in _OWN_COMMANDS).parse_args(argv)
    if getattr(args, "admin_main", None) is not None:
        from ..admin.cli import run as run_admin

        return run_admin(args)
    if args.command == "probe":
        address = args.address
        if address is None:
            try:
                address = configured_address(args.config)
            except ValueError as e:
                print(f"kbroker probe: {e}", file=sys.stderr)
                return 1
        status = probe(address, args.timeout)
        if status == 0 and args.ready:
            from ..admin.cli import probe_ready
            from ..admin.client import AdminError
            from ..admin.endpoint import admin_url

            try:
                url = admin_url(args.admin_url, address, args.timeout)
            except AdminError as e:
                print(f"kbroker probe: {e}", file=sys.stderr)
                return 1
            status = probe_ready(url, args.timeout)
        return status
    if args.command == "user":
        return user_add(args)
    if args.command == "analyze":
        from ..pipeline.job import main as analyze_main

        return analyze_main(args)
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    # Every start-up mistake ends here as one line on stderr, before anything is logged or written.
    try:
        config, sources = load_config_with_sources(flags, args.config)
    except ValueError as e:
        print(f"kbroker: {e}", file=sys.stderr)
        return 2
    from .startup import StartupError, prepare

    if config.dev_security:  # adds its SSL and SASL_SSL listeners (the module only with the flag)
        from .security.dev_security import configure as configure_dev_security

        config = configure_dev_security(config)

    if config.cluster:  # before anything is written: the database is checked (and its schema made) first
        refused = _check_cluster_database(config)
        if refused is not None:
            return refused
    try:
        prepared = prepare(config, sources)
    except StartupError as e:
        print(f"kbroker: {e}", file=sys.stderr)
        return 1
    from .process import run

    return run(config, prepared, sources)


def _check_cluster_database(config: BrokerConfig) -> int | None:
    """`serve --cluster URL`: the database reached, its kbroker schema checked, created or migrated
    (broker/storage/postgres/schema.py) before anything else; a refusal is one line and exit 1, having
    written nothing. None: go on and serve as a node of that cluster (broker/postgres_node.py)."""
    import asyncio

    from .storage.postgres.schema import ClusterDatabaseError, open_cluster_database

    async def check() -> None:
        conn, _ = await open_cluster_database(config.cluster)
        await conn.close()

    try:
        asyncio.run(check())
    except ClusterDatabaseError as e:
        print(f"kbroker: {e}", file=sys.stderr)
        return 1
    return None


if __name__ == "__main__":
    raise SystemExit(main())
