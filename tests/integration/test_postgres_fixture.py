"""The scratch PostgreSQL server the cluster tests run on (tests/integration/postgres.py)."""

from __future__ import annotations

import subprocess


def test_a_scratch_postgres_serves_with_passwords_over_tcp_and_stops(postgres):
    database = postgres.create_database()
    assert postgres.psql("SHOW synchronous_commit", database) == "on"
    env = {"PGPASSWORD": postgres.password, "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(["psql", "-X", "-A", "-t", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres",
                         "-d", database, "-c", "SELECT 41 + 1"], capture_output=True, text=True, timeout=30, env=env)
    assert ok.stdout.strip() == "42", ok.stderr
    env["PGPASSWORD"] = "wrong"
    refused = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres", "-d",
                              database, "-c", "SELECT 1"], capture_output=True, text=True, timeout=30, env=env)
    assert refused.returncode != 0 and "password authentication failed" in refused.stderr
