"""librdkafka's own tests 0081 (AlterConfigs), 0092, 0135 and 0142 against kbroker, each on a broker of the
settings it needs (tests/integration/librdkafka_suite.py: the build, the broker, the runner and its
verdicts; `make librdkafka-tests` builds it)."""

from __future__ import annotations

from kbroker.tests.integration.librdkafka_suite import file_tests

runs, test_librdkafka_test_passes_against_kbroker = file_tests("settings")
