"""librdkafka's own tests 0077, 0081 (AlterConfigs), 0092, 0103, 0135, 0142 and 0172 against kbroker (tests/integration/librdkafka_suite.py: the build,
the broker, the runner and its verdict; `make librdkafka-tests` builds it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.tests.integration.librdkafka_suite import Case, check, params


@pytest.mark.parametrize("case", params(1))
def test_librdkafka_test_passes_against_kbroker(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
