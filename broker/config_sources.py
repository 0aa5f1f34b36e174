"""Where the broker's settings come from, in rising priority:

1. a file: `--config FILE` (or KBROKER_CONFIG), TOML when it ends in `.toml`, else Kafka's
   `server.properties` format; without one, the apache/kafka image's paths (broker/kafka_names.py);
2. `KAFKA_*` environment variables, with Kafka's names as the apache/kafka and cp-kafka images read
   them (and `CLUSTER_ID`, which those images format the log directory with);
3. `KBROKER_*` environment variables, one per setting (`KBROKER_DATA_DIR`);
4. command-line flags.

Each value keeps the label of where it came from (`--num-partitions`, `KBROKER_NUM_PARTITIONS`,
`KAFKA_NUM_PARTITIONS`, `num.partitions in server.properties`), so a mistake names what the user
wrote. What the broker should tell the user about its settings (a Kafka name not needed here, an
unknown one, a misspelt `KBROKER_*` variable) is collected as notices, logged once logging is set up.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import kafka_names as kafka

ENV_PREFIX = "KBROKER_"
FILE, KAFKA_ENV, ENV, FLAG = 1, 2, 3, 4  # where a value came from, in rising priority
# KBROKER_* variables that are not settings: the admin CLI's, `kbroker user add`'s, the suite's.
OTHER_VARIABLES = frozenset({"KBROKER_CONFIG", "KBROKER_BOOTSTRAP", "KBROKER_ADMIN_URL", "KBROKER_USER_PASSWORD"})
# the suite's (KBROKER_REQUIRE_KAFKA, KBROKER_REQUIRE_GO: make test fails rather than skips without them)
OTHER_PREFIXES = ("KBROKER_TEST_", "KBROKER_BENCH_", "KBROKER_REQUIRE_", "KBROKER_TOOLS_")


class ConfigError(ValueError):
    """A setting the broker cannot start with; the message is the one line the CLI prints."""


@dataclasses.dataclass(frozen=True, slots=True)
class Notice:
    """One line the broker logs about its settings once it logs: `level` is info or warning."""

    level: str
    event: str
    fields: dict[str, Any]


class Sources:
    """Where each explicitly set value came from, so errors name what the user wrote."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.levels: dict[str, int] = {}
        self.notices: list[Notice] = []

    def set(self, name: str, level: int, label: str) -> None:
        self.labels[name], self.levels[name] = label, level

    def drop(self, name: str) -> None:
        self.labels.pop(name, None)
        self.levels.pop(name, None)

    def label(self, name: str) -> str:
        return self.labels.get(name) or "--" + name.replace("_", "-")

    def note(self, level: str, event: str, **fields: Any) -> None:
        self.notices.append(Notice(level, event, fields))


def coerce(f: dataclasses.Field, value: Any, label: str) -> Any:
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    kind = kind.removesuffix(" | None")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{label}: {value!r} is not true or false")
    if kind == "int":
        if isinstance(value, bool) or isinstance(value, float):
            raise ConfigError(f"{label}: {value!r} is not an integer")
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{label}: {value!r} is not an integer") from None
    if kind == "float":
        if isinstance(value, bool):
            raise ConfigError(f"{label}: {value!r} is not a number")
        try:
            return float(str(value).strip())
        except ValueError:
            raise ConfigError(f"{label}: {value!r} is not a number") from None
    if isinstance(value, (dict, list)):
        raise ConfigError(f"{label}: expected a string, not {value!r}")
    return str(value)


class Gathered:
    """The values set so far and where each came from."""

    def __init__(self, fields: dict[str, dataclasses.Field]) -> None:
        self.fields = fields
        self.values: dict[str, Any] = {}
        self.sources = Sources()

    def put(self, name: str, raw: Any, level: int, label: str) -> None:
        self.values[name] = coerce(self.fields[name], raw, label)
        self.sources.set(name, level, label)

    def put_kafka(self, key: str, raw: str, level: int, label: str, where: str) -> None:
        """A Kafka name from a properties file or a KAFKA_* variable: set, or said why not."""
        field = kafka.field_for(key, self.fields)
        if field == "data_dir":
            dirs = [d.strip() for d in raw.split(",") if d.strip()]
            if len(dirs) > 1:
                raise ConfigError(f"{label}: kbroker keeps its logs in one directory; give one, not {raw!r}")
            raw = dirs[0] if dirs else raw
        if key == "process.roles" and "broker" not in {r.strip() for r in raw.split(",")}:
            raise ConfigError(f"{label}: {raw!r} makes this node a KRaft controller only; kbroker needs no "
                              f"controllers: leave the controller services out and run kbroker as the broker")
        if field is not None:
            self.put(field, raw, level, label)
        if key in kafka.NOT_NEEDED:
            self.sources.note("info", "config_not_needed", setting=key, value=raw, source=where,
                              why=kafka.NOT_NEEDED[key])
        elif field is None:
            self.sources.note("warning", "config_unknown", setting=key, source=where,
                              why=kafka.unknown_hint(key, self.fields))


def gather(fields: Sequence[dataclasses.Field], flags: dict[str, Any], config_file: str | None,
           env: Mapping[str, str], image_paths: Sequence[str]) -> tuple[dict[str, Any], Sources]:
    """Every explicitly set value of the settings `fields` (BrokerConfig's), from every source, each
    over the ones below it."""
    got = Gathered({f.name: f for f in fields})
    _read_file(got, config_file, env, image_paths)
    _read_kafka_env(got, env)
    _read_kbroker_env(got, env)
    for name, value in flags.items():
        if value is not None and name in got.fields:
            got.put(name, value, FLAG, "--" + name.replace("_", "-"))
    return got.values, got.sources


# --- 1. the file ---------------------------------------------------------------------------------------

def _read_file(got: Gathered, config_file: str | None, env: Mapping[str, str], image_paths: Sequence[str]) -> None:
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    option = "--config" if config_file else ENV_PREFIX + "CONFIG"
    if not path:
        path = _image_file(env, image_paths)
        if path is None:
            return
        option = path
        got.sources.note("info", "config_file_read", path=path,
                         why="the apache/kafka image's path (kbroker serve --config FILE reads another)")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise ConfigError(f"{option}: cannot read {path}: {e.strerror or e}") from None
    if path.endswith(".toml"):
        _read_toml(got, path, data)
    else:
        _read_properties(got, path, data)


def _image_file(env: Mapping[str, str], image_paths: Sequence[str]) -> str | None:
    """The image's mounted file (the first path), else its default file (the next) unless KAFKA_*
    settings are given: the image then writes its final file from those variables alone."""
    kafka_settings = any(k.startswith(kafka.ENV_PREFIX) and k not in kafka.JVM_VARIABLES for k in env)
    for i, path in enumerate(image_paths):
        if i > 0 and kafka_settings:
            break
        if os.path.isfile(path):
            return path
    return None


def _read_toml(got: Gathered, path: str, data: bytes) -> None:
    """TOML keys are the setting names (`data_dir`) or Kafka's dotted names, bare or quoted."""
    import tomllib  # only with a TOML file

    try:
        table = tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    for key, value in _flat_toml(table):
        name = kafka.ALIASES.get(key) or key.replace(".", "_").replace("-", "_")
        label = f"{key} in {path}"
        if name in got.fields:
            got.put(name, value, FILE, label)
        elif key in kafka.NOT_NEEDED:
            got.sources.note("info", "config_not_needed", setting=key, value=value, source=path,
                             why=kafka.NOT_NEEDED[key])
        else:
            raise ConfigError(f"{path}: unknown setting {key!r}")


def _flat_toml(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """The file's settings as (key, value). Kafka's dotted names written bare (`num.partitions = 4`)
    are nested tables in TOML, as is a `[group]` section: the path to a value is its key."""
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flat_toml(value, f"{prefix}{key}.")
        else:
            out.append((prefix + key, value))
    return out


def _read_properties(got: Gathered, path: str, data: bytes) -> None:
    """Kafka's server.properties (ISO 8859-1, as java.util.Properties reads it); a name set twice:
    the later line wins, as in Kafka."""
    entries = kafka.read_properties(data.decode("latin-1"))
    last = {key: (value, line) for key, value, line in entries}
    for key in sorted(last, key=_alias_rank):
        value, line = last[key]
        got.put_kafka(key, value.strip(), FILE, f"{key} in {path} line {line}", path)


def _alias_rank(key: str) -> int:
    """Of two Kafka names of one setting in one place, the preferred one is applied last."""
    return kafka.ALIAS_ORDER.index(key) + 1 if key in kafka.ALIAS_ORDER else 0


# --- 2. KAFKA_* and CLUSTER_ID ---------------------------------------------------------------------------

def _read_kafka_env(got: Gathered, env: Mapping[str, str]) -> None:
    names: dict[str, str] = {}  # property name -> variable
    for variable in sorted(env):
        if not variable.startswith(kafka.ENV_PREFIX):
            continue
        if variable == kafka.LOG4J_LOGGERS and kafka.logs_requests(env[variable]) is not None:
            got.put("log_requests", kafka.logs_requests(env[variable]), KAFKA_ENV, variable)
            continue  # the loggers' levels besides kafka.request.logger's have no kbroker setting
        if variable in kafka.JVM_VARIABLES or variable in kafka.CLIENT_VARIABLES:
            got.sources.note("info", "config_not_needed", setting=variable, value=env[variable], source=variable,
                             why=kafka.CLIENT_VARIABLE if variable in kafka.CLIENT_VARIABLES else kafka.NO_JVM)
            continue
        if variable == kafka.LOG4J_ROOT_LOGLEVEL:
            level = kafka.LOG4J_LEVELS.get(env[variable].strip().upper())
            if level is None:
                raise ConfigError(f"{variable}: {env[variable]!r} is not a log4j level (INFO, WARN, ERROR, DEBUG)")
            got.put("log_level", level, KAFKA_ENV, variable)
            continue
        names[kafka.property_name(variable)] = variable
    if "advertised.listeners" in names and "listeners" not in names:
        # the image's default: listen where it advertises, on every interface
        derived = kafka.listeners_from_advertised(env[names["advertised.listeners"]])
        got.put("listeners", derived, KAFKA_ENV, f"listeners derived from {names['advertised.listeners']}")
    for name in sorted(names, key=_alias_rank):
        variable = names[name]
        got.put_kafka(name, env[variable].strip(), KAFKA_ENV, variable, variable)
    if env.get("CLUSTER_ID", "").strip():
        got.put("cluster_id", env["CLUSTER_ID"].strip(), KAFKA_ENV, "CLUSTER_ID")


# --- 3. KBROKER_* ----------------------------------------------------------------------------------------

def _read_kbroker_env(got: Gathered, env: Mapping[str, str]) -> None:
    variables = {ENV_PREFIX + name.upper(): name for name in got.fields}
    for variable in sorted(env):
        if not variable.startswith(ENV_PREFIX):
            continue
        name = variables.get(variable)
        if name is not None:
            got.put(name, env[variable], ENV, variable)
        elif variable not in OTHER_VARIABLES and not variable.startswith(OTHER_PREFIXES):
            close = difflib.get_close_matches(variable, [*variables, *OTHER_VARIABLES], n=1, cutoff=0.8)
            got.sources.note("warning", "config_unknown", setting=variable, source=variable,
                             why=f"not a kbroker setting; ignored (did you mean {close[0]}?)" if close
                             else "not a kbroker setting; ignored (kbroker serve --help lists them)")
