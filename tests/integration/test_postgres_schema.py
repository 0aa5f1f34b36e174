"""`kbroker serve --cluster postgresql://...` against a real PostgreSQL (issue 44): the schema is made
by kbroker with a version table, and a node refuses to start, in one line, with a non-zero exit and
having written nothing, against an unreachable database, a wrong password, a schema from the future
and a role without the privileges it needs; a node id a live process holds is refused too."""

from __future__ import annotations

import subprocess
import sys

from kbroker.broker.storage.postgres.schema import SCHEMA_VERSION
from kbroker.tests.integration.broker_process import BrokerProcess, free_port

TABLES = ["batches", "broker_configs", "brokers", "cluster", "controller_lease", "epoch_history", "finalized_features",
          "kbroker_schema", "partitions", "producer_id_blocks", "topic_configs", "topics"]
VERSIONS = ",".join(str(v) for v in range(1, SCHEMA_VERSION + 1))  # every migration, in order


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


def serving(url: str, tmp_path, node_id: int = 1) -> BrokerProcess:
    return BrokerProcess(tmp_path / f"serving-{node_id}", "--cluster", url, "--node-id", str(node_id))


def test_an_empty_database_gets_the_schema_once_with_its_version_and_cluster_id(postgres, tmp_path):
    database = postgres.create_database()
    url = postgres.url(database)
    with serving(url, tmp_path, 1) as first:
        assert tables(postgres, database) == TABLES
        assert postgres.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM kbroker_schema",
                             database) == VERSIONS
        cluster_id = postgres.psql("SELECT cluster_id FROM cluster", database)
        assert len(cluster_id) == 22 and first.events("broker_started")[0]["cluster_id"] == cluster_id
        with serving(url, tmp_path, 2) as second:
            assert second.events("broker_started")[0]["cluster_id"] == cluster_id
            assert postgres.psql("SELECT count(*) FROM kbroker_schema", database) == str(SCHEMA_VERSION)
            assert postgres.psql("SELECT string_agg(node_id::text, ',' ORDER BY node_id) FROM brokers "
                                 "WHERE lease_expires > now()", database) == "1,2"
            # a node id a live process holds is refused to another
            again = BrokerProcess(tmp_path / "another-2", "--cluster", url, "--node-id", "2", start=False)
            taken = subprocess.run(again.command(), capture_output=True, text=True, timeout=60)
            assert taken.returncode == 1 and "node id 2 is held by a live broker" in taken.stdout + taken.stderr


def test_a_schema_of_version_1_is_migrated_and_keeps_its_cluster_and_partitions(postgres, tmp_path):
    from kbroker.broker.storage.postgres.schema import SCHEMA_V1

    database = postgres.create_database()
    postgres.psql(SCHEMA_V1 + "INSERT INTO kbroker_schema (version) VALUES (1); "
                  "INSERT INTO cluster (cluster_id) VALUES ('AAAAAAAAAAAAAAAAAAAAAA'); "
                  "INSERT INTO topics (name, topic_id, num_partitions) "
                  "VALUES ('kept', '00000000-0000-0000-0000-000000000001', 1); "
                  "INSERT INTO partitions (topic, partition, leader, leader_epoch, replicas, log_start, log_end) "
                  "VALUES ('kept', 0, 1, 0, '{1}', 5, 9)", database)
    with serving(postgres.url(database), tmp_path, 1) as node:
        assert node.events("broker_started")[0]["cluster_id"] == "AAAAAAAAAAAAAAAAAAAAAA"
        assert tables(postgres, database) == TABLES
        assert postgres.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM kbroker_schema",
                             database) == VERSIONS
        assert postgres.psql("SELECT name FROM topics WHERE name = 'kept'", database) == "kept"
        # version 3: the cleaner's checkpoint, none yet (a leader takes max(log start, it))
        assert postgres.psql("SELECT log_start || ',' || log_end || ',' || cleaned_to FROM partitions "
                             "WHERE topic = 'kept'", database) == "5,9,0"


def test_a_schema_of_version_3_gets_the_clusters_feature_levels(postgres, tmp_path):
    """Version 4: the finalized feature levels are the cluster's, none changed yet (epoch 1); a node's
    features.json from before (each node kept its own) is ignored, saying so."""
    import asyncio

    from kbroker.broker.operations.features import FileLevels
    from kbroker.broker.storage.postgres.schema import SCHEMA_V1, SCHEMA_V2, SCHEMA_V3
    from kbroker.tests.integration.test_share_version import features

    database = postgres.create_database()
    postgres.psql(SCHEMA_V1 + SCHEMA_V2 + SCHEMA_V3 + "INSERT INTO kbroker_schema (version) VALUES (1), (2), (3); "
                  "INSERT INTO cluster (cluster_id) VALUES ('AAAAAAAAAAAAAAAAAAAAAA')", database)
    asyncio.run(FileLevels(tmp_path / "serving-1").commit({"share.version": 0}, lambda _stored: None))
    with serving(postgres.url(database), tmp_path, 1) as node:
        assert postgres.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM kbroker_schema",
                             database) == VERSIONS
        assert postgres.psql("SELECT features_epoch || ',' || (SELECT count(*) FROM finalized_features) "
                             "FROM cluster", database) == "1,0"
        levels, epoch = features(node.bootstrap)
        assert (levels["share.version"], epoch) == (2, 1)  # the release's, not the old file's 0
        assert node.events("features_file_ignored")


def test_a_schema_from_a_newer_kbroker_is_refused_and_left_alone(postgres, tmp_path):
    database = postgres.create_database()
    postgres.psql("CREATE TABLE kbroker_schema (version integer PRIMARY KEY, applied_at timestamptz); "
                  "INSERT INTO kbroker_schema VALUES (7, now())", database)
    line = refused_in_one_line(serve(postgres.url(database), tmp_path), "schema is version 7",
                               f"newer than this kbroker knows ({SCHEMA_VERSION})")
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
    owner = serving(postgres.url(database), tmp_path, 1)
    owner.stop()
    refused_in_one_line(serve(weak, tmp_path, node_id=2), "role kb_weak lacks SELECT, INSERT, UPDATE, DELETE on",
                        "kbroker_schema")
    assert postgres.psql("SELECT string_agg(node_id::text, ',') FROM brokers", database) == "1"
    postgres.psql("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO kb_weak", database)
    with serving(weak, tmp_path, 2) as now_it_may:
        assert now_it_may.events("broker_started")
