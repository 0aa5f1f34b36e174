"""The cluster's tables in PostgreSQL (issue 44), created and migrated by kbroker, and the checks a node
passes before it starts against them.

`kbroker_schema` holds the version this file's DDL is at (SCHEMA_VERSION). A node:
* on an empty database creates every table, in one transaction, under an advisory lock (several
  nodes starting at once create it once);
* on an older version runs the migrations from there, in the same way;
* on a version it does not know (a newer kbroker's) refuses to start;
* refuses with one line, before it writes anything (every check runs before the transaction that
  writes, and that transaction is all or nothing), when the database is unreachable, the password
  wrong, the database missing, or its role lacks a privilege it needs.

The tables (one row per thing; the offsets of a partition's batches never overlap and leave no gap:
an append moves `partitions.log_end` from exactly the batch's base offset, in the transaction that
inserts it, and only while (leader, leader_epoch) are the appender's, so a deposed leader inserts
nothing):
* cluster: the cluster id;
* brokers: node id, endpoints, lease expiry (PostgreSQL's clock, now(), decides it);
* controller_lease: the one row of whoever places topics and moves partitions;
* topics, topic_configs, partitions (leader, leader_epoch, replicas, log start and end), epoch_history;
* producer_id_blocks: blocks of producer ids handed to nodes, never reused;
* batches: record batches as the producer sent them (offsets assigned), keyed by
  (topic, partition, base offset), with what idempotence and timestamp search need beside them;
* broker_configs (version 2): the dynamic broker configs, per node id, -1 the cluster-wide defaults;
* partitions.cleaned_to (version 3): where the leader's last compaction run ended (the dirty part's
  start), stored with the run's rewrites, so a new leader's cleaner starts from there;
* finalized_features and cluster.features_epoch (version 4): the feature levels UpdateFeatures set and
  their epoch, one for the cluster (features.py).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import urlsplit

SCHEMA_VERSION = 4
CONNECT_TIMEOUT_S = 10.0
# pg_advisory_xact_lock's key for "creating or migrating kbroker's schema" (any constant of our own).
SCHEMA_LOCK = 0x6B62726F6B6572  # "kbroker"

SCHEMA_V1 = """
CREATE TABLE kbroker_schema (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE cluster (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    cluster_id text NOT NULL
);
CREATE TABLE brokers (
    node_id integer PRIMARY KEY,
    endpoints jsonb NOT NULL,
    incarnation uuid NOT NULL,
    lease_expires timestamptz NOT NULL
);
CREATE TABLE controller_lease (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    node_id integer NOT NULL,
    epoch bigint NOT NULL,
    lease_expires timestamptz NOT NULL
);
CREATE TABLE topics (
    name text PRIMARY KEY,
    topic_id uuid NOT NULL UNIQUE,
    num_partitions integer NOT NULL CHECK (num_partitions > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE topic_configs (
    topic text NOT NULL REFERENCES topics (name) ON DELETE CASCADE,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (topic, key)
);
CREATE TABLE partitions (
    topic text NOT NULL REFERENCES topics (name) ON DELETE CASCADE,
    partition integer NOT NULL CHECK (partition >= 0),
    leader integer NOT NULL,
    leader_epoch integer NOT NULL,
    replicas integer[] NOT NULL,
    log_start bigint NOT NULL DEFAULT 0,
    log_end bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE epoch_history (
    topic text NOT NULL,
    partition integer NOT NULL,
    leader_epoch integer NOT NULL,
    start_offset bigint NOT NULL,
    PRIMARY KEY (topic, partition, leader_epoch),
    FOREIGN KEY (topic, partition) REFERENCES partitions (topic, partition) ON DELETE CASCADE
);
CREATE TABLE producer_id_blocks (
    first_id bigint PRIMARY KEY,
    size integer NOT NULL,
    node_id integer NOT NULL,
    assigned_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE batches (
    topic text NOT NULL,
    partition integer NOT NULL,
    base_offset bigint NOT NULL,
    last_offset bigint NOT NULL,
    leader_epoch integer NOT NULL,
    max_timestamp bigint NOT NULL,
    producer_id bigint NOT NULL,
    producer_epoch smallint NOT NULL,
    base_sequence integer NOT NULL,
    attributes smallint NOT NULL,
    records bytea NOT NULL,
    PRIMARY KEY (topic, partition, base_offset),
    CHECK (last_offset >= base_offset),
    FOREIGN KEY (topic, partition) REFERENCES partitions (topic, partition) ON DELETE CASCADE
);
"""

# Version 2: the dynamic broker configs (AlterConfigs on BROKER resources), per node and (node_id -1)
# the cluster-wide defaults, every node reading its own layer and the defaults.
SCHEMA_V2 = """
CREATE TABLE broker_configs (
    node_id integer NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (node_id, key)
);
"""

# Version 3: the cleaner's checkpoint per partition (Kafka's cleaner-offset-checkpoint file): where the
# last compaction run's cleanable part ended, so a new leader does not take the whole partition as dirty.
SCHEMA_V3 = """
ALTER TABLE partitions ADD COLUMN cleaned_to bigint NOT NULL DEFAULT 0;
"""

# Version 4: the finalized feature levels UpdateFeatures set (Kafka's FeatureLevelRecords), and their
# epoch, one for the cluster (ApiVersions' FinalizedFeaturesEpoch; 1 before any change).
SCHEMA_V4 = """
CREATE TABLE finalized_features (
    feature text PRIMARY KEY,
    level integer NOT NULL CHECK (level >= 0)
);
ALTER TABLE cluster ADD COLUMN features_epoch bigint NOT NULL DEFAULT 1 CHECK (features_epoch >= 1);
"""

# version -> the DDL that brings version - 1 to it
MIGRATIONS: dict[int, str] = {1: SCHEMA_V1, 2: SCHEMA_V2, 3: SCHEMA_V3, 4: SCHEMA_V4}
TABLES = ("kbroker_schema", "cluster", "brokers", "controller_lease", "topics", "topic_configs", "partitions",
          "epoch_history", "producer_id_blocks", "batches", "broker_configs", "finalized_features")
TABLE_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"


class ClusterDatabaseError(Exception):
    """Why a node cannot use the cluster's database: one line, printed as is (no password in it)."""


def describe_url(url: str) -> str:
    """user@host:port/database, never the password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "(an unparsable URL)"
    user = f"{parts.username}@" if parts.username else ""
    return f"{user}{host}:{port}{parts.path or '/'}"


def check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ClusterDatabaseError(f"--cluster: {describe_url(url)} is not a postgresql:// URL")


def application_name(node_id: int) -> str:
    """What a node's connections call themselves (pg_stat_activity.application_name): the controller
    ends the sessions of a node whose lease expired by it (membership.end_sessions_of)."""
    return f"kbroker-node-{node_id}"


async def connect(url: str, *, timeout: float = CONNECT_TIMEOUT_S, name: str = "kbroker") -> Any:
    """An asyncpg connection with synchronous_commit=on, or ClusterDatabaseError naming why not.
    `name`: its application_name (a node's: application_name(node_id))."""
    check_url(url)
    try:
        import asyncpg
    except ImportError:
        raise ClusterDatabaseError("--cluster needs asyncpg: pip install 'kbroker[cluster]'") from None
    where = describe_url(url)
    try:
        conn = await asyncpg.connect(url, timeout=timeout, server_settings={
            "synchronous_commit": "on", "application_name": name})
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError) as e:
        raise ClusterDatabaseError(f"PostgreSQL at {where} refused the login: {_first_line(e)}") from None
    except asyncpg.InvalidCatalogNameError as e:
        raise ClusterDatabaseError(f"PostgreSQL at {where}: {_first_line(e)}") from None
    except asyncpg.PostgresError as e:
        raise ClusterDatabaseError(f"PostgreSQL at {where} refused the connection: {_first_line(e)}") from None
    except (OSError, asyncio.TimeoutError, asyncpg.InterfaceError) as e:
        reason = _first_line(e) or type(e).__name__
        raise ClusterDatabaseError(f"cannot reach PostgreSQL at {where}: {reason}") from None
    return conn


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]


async def stored_version(conn: Any) -> int | None:
    """The schema's version, None on a database without kbroker's tables."""
    if await conn.fetchval("SELECT to_regclass('kbroker_schema')") is None:
        return None
    return await conn.fetchval("SELECT max(version) FROM kbroker_schema")


async def missing_privileges(conn: Any) -> list[str]:
    """The tables (of a created schema) on which this role lacks one of TABLE_PRIVILEGES."""
    rows = await conn.fetch(
        "SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NOT NULL "
        "AND NOT has_table_privilege(current_user, t, $2)",
        list(TABLES), TABLE_PRIVILEGES)
    return [row["t"] for row in rows]


async def prepare_schema(conn: Any) -> tuple[int, str]:
    """Create or migrate the schema to SCHEMA_VERSION, or refuse (ClusterDatabaseError) having written
    nothing. Returns (the version found before, 0 for none; the cluster id)."""
    import asyncpg

    try:
        if await conn.fetchval("SELECT to_regclass('kbroker_schema')") is not None:
            await _check_table_privileges(conn)
        found = await stored_version(conn)
        if found is not None and found > SCHEMA_VERSION:
            raise ClusterDatabaseError(f"the database's kbroker schema is version {found}, newer than this kbroker "
                                       f"knows ({SCHEMA_VERSION}): upgrade kbroker")
        await _check_privileges(conn, found)
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            found = await stored_version(conn)  # another node may have made it while we waited
            if found is not None and found > SCHEMA_VERSION:
                raise ClusterDatabaseError(f"the database's kbroker schema is version {found}, newer than this "
                                           f"kbroker knows ({SCHEMA_VERSION}): upgrade kbroker")
            for version in range((found or 0) + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[version])
                await conn.execute("INSERT INTO kbroker_schema (version) VALUES ($1)", version)
            cluster_id = await conn.fetchval("SELECT cluster_id FROM cluster")
            if cluster_id is None:
                cluster_id = _new_cluster_id()
                await conn.execute("INSERT INTO cluster (cluster_id) VALUES ($1)", cluster_id)
    except asyncpg.InsufficientPrivilegeError as e:
        raise ClusterDatabaseError(f"the role lacks a privilege kbroker needs: {_first_line(e)}") from None
    return found or 0, cluster_id


async def _check_privileges(conn: Any, found: int | None) -> None:
    user = await conn.fetchval("SELECT current_user")
    if found is None or found < SCHEMA_VERSION:
        schema = await conn.fetchval("SELECT current_schema()")
        if schema is None or not await conn.fetchval("SELECT has_schema_privilege(current_user, $1, 'CREATE')",
                                                      schema):
            what = "create" if found is None else "migrate"
            raise ClusterDatabaseError(f"role {user} may not create tables in schema {schema or '(none)'}, so it "
                                       f"cannot {what} kbroker's schema: grant CREATE on it, or create it once as "
                                       f"its owner")


async def _check_table_privileges(conn: Any) -> None:
    lacking = await missing_privileges(conn)
    if lacking:
        user = await conn.fetchval("SELECT current_user")
        raise ClusterDatabaseError(f"role {user} lacks {TABLE_PRIVILEGES} on {', '.join(lacking)}")


def _new_cluster_id() -> str:
    """Kafka's cluster id format: a random UUID in URL-safe base64 without padding (22 characters)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def open_cluster_database(url: str, name: str = "kbroker") -> tuple[Any, str]:
    """The start-up path of `kbroker serve --cluster URL`: connect, check, create or migrate. Returns
    (the connection, the cluster id); ClusterDatabaseError, nothing written, when the node must not start."""
    conn = await connect(url, name=name)
    try:
        _, cluster_id = await prepare_schema(conn)
    except BaseException:
        await conn.close()
        raise
    return conn, cluster_id
