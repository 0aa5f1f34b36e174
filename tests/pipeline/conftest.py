"""One SparkSession for every pipeline test (starting one costs 6-9 s), and one offline data directory."""

from __future__ import annotations

import pytest

from kbroker.tests.pipeline import datadir


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kbroker.pipeline import source
    from kbroker.pipeline.job import make_session

    session = make_session("local[2]", "kbroker-pipeline-tests", extra={
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
    })
    source.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def scenario(tmp_path_factory) -> datadir.Scenario:
    return datadir.build(tmp_path_factory.mktemp("pipeline") / "data")
