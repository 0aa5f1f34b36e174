"""librdkafka's own share consumer tests 0175, 0176, 0178, 0180, 0184 and 0190 against kbroker (tests/integration/librdkafka_suite.py: the build,
the broker, the runner and its verdict; `make librdkafka-tests` builds it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.tests.integration.librdkafka_suite import Case, check, params


@pytest.mark.parametrize("case", params(4))
def test_librdkafka_test_passes_against_kbroker(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
