"""`make bench`'s cluster over PostgreSQL (bench/postgres_cluster.py) at its smallest: three nodes over a
scratch PostgreSQL give a produce, consume and OffsetCommit figure and a failover time (the node killed,
started again). Sanity only: speed lives in `make bench`, never in a test's assert."""

from __future__ import annotations

from kbroker.bench import postgres_cluster
from kbroker.tests.integration.postgres import require_postgres


def test_three_nodes_give_every_figure_and_a_failover_time(capsys):
    require_postgres()
    sizes = postgres_cluster.Sizes(messages=2_000, rounds=1, members=2, commit_seconds=0.5)
    results = postgres_cluster.run(sizes, setups=("pg-3",), failover_rounds=1)
    figures = results["pg-3"]
    assert all(len(figures[k]) == 1 and figures[k][0] > 0 for k in ("produce", "consume", "commit", "failover"))
    postgres_cluster.report(results, sizes)
    assert "pg-3    produce" in capsys.readouterr().out
