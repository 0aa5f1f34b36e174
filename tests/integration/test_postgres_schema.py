"""`kbroker serve --cluster postgresql://...` against a real PostgreSQL (issue 44): the schema is made
by kbroker with a version table, and a node refuses to start, in one line, with a non-zero exit and
having written nothing, against an unreachable database, a wrong password, a schema from the future
and a role without the privileges it needs."""

from __future__ import annotations

import subprocess
import sys

from kbroker.tests.integration.broker_process import free_port

TABLES = ["batches", "brokers", "cluster", "controller_lease", "epoch_history", "kbroker_schema", "partitions",
          "producer_id_blocks", "topic_configs", "topics"]


def serve(url: str, tmp_path, node_id: int = 1) -> subprocess.CompletedProcess:
    data_dir = tmp_path / f"data-{node_id}"
    out = subprocess.run([sys.executable, "-m", "kbroker", "serve", "--cluster", url, "--node-id", str(node_id),
                          "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{free_port()}"],
                         capture_output=True, text=True, timeout=60)
    assert not data_dir.exists(), "the data directory was made"
    return out


def tables(postgres, database: str) -> list[str]:
    listed = postgres.psql("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1", database)
    return listed.split() if listed else []


def refused_in_one_line(out: subprocess.CompletedProcess, *fragments: str) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_an_empty_database_gets_the_schema_once_with_its_version_and_cluster_id(postgres, tmp_path):
    database = postgres.create_database()
    url = postgres.url(database)
    first = serve(url, tmp_path)
    # serving as a node is not built yet: the node says so after the database checks passed
    assert first.returncode == 2 and "the cluster's database is ready (schema version 1" in first.stderr, first.stderr
    assert tables(postgres, database) == TABLES
    assert postgres.psql("SELECT string_agg(version::text, ',') FROM kbroker_schema", database) == "1"
    cluster_id = postgres.psql("SELECT cluster_id FROM cluster", database)
    assert len(cluster_id) == 22
    second = serve(url, tmp_path, node_id=2)
    assert second.returncode == 2 and f"cluster id {cluster_id}" in second.stderr
    assert postgres.psql("SELECT count(*) FROM kbroker_schema", database) == "1"


def test_a_schema_from_a_newer_kbroker_is_refused_and_left_alone(postgres, tmp_path):
    database = postgres.create_database()
    postgres.psql("CREATE TABLE kbroker_schema (version integer PRIMARY KEY, applied_at timestamptz); "
                  "INSERT INTO kbroker_schema VALUES (7, now())", database)
    line = refused_in_one_line(serve(postgres.url(database), tmp_path), "schema is version 7",
                               "newer than this kbroker knows (1)")
    assert postgres.password not in line
    assert tables(postgres, database) == ["kbroker_schema"]
    assert postgres.psql("SELECT string_agg(version::text, ',') FROM kbroker_schema", database) == "7"


def test_a_wrong_password_is_refused_without_showing_it(postgres, tmp_path):
    database = postgres.create_database()
    line = refused_in_one_line(serve(postgres.url(database, password="not-the-password"), tmp_path),
                               "refused the login", "password authentication failed")
    assert "not-the-password" not in line and f"postgres@127.0.0.1:{postgres.port}/{database}" in line
    assert tables(postgres, database) == []


def test_an_unreachable_database_is_refused(postgres, tmp_path):
    port = free_port()  # nothing listens there
    line = refused_in_one_line(serve(postgres.url("kbroker", port=port), tmp_path), "cannot reach PostgreSQL",
                               f"127.0.0.1:{port}/kbroker")
    assert postgres.password not in line


def test_a_missing_database_is_refused(postgres, tmp_path):
    refused_in_one_line(serve(postgres.url("no_such_database"), tmp_path), 'database "no_such_database" does not exist')


def test_a_role_without_the_privileges_it_needs_is_refused_and_writes_nothing(postgres, tmp_path):
    database = postgres.create_database()
    postgres.create_role("kb_weak", "weak-secret")
    weak = postgres.url(database, user="kb_weak", password="weak-secret")
    # PostgreSQL 15 grants no CREATE on schema public to other roles than the database's owner
    refused_in_one_line(serve(weak, tmp_path), "role kb_weak may not create tables in schema public")
    assert tables(postgres, database) == []
    # made by the owner, the schema is there, but the role may not use its tables
    assert serve(postgres.url(database), tmp_path).returncode == 2
    refused_in_one_line(serve(weak, tmp_path), "role kb_weak lacks SELECT, INSERT, UPDATE, DELETE on",
                        "kbroker_schema")
    assert postgres.psql("SELECT count(*) FROM brokers", database) == "0"
    postgres.psql("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO kb_weak", database)
    assert serve(weak, tmp_path).returncode == 2  # now it may
