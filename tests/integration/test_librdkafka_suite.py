"""librdkafka's own tests 0077, 0103 and the share consumer tests 0170-0181, 0184, 0185 and 0190 against
kbroker, all at once against one broker with librdkafka's default scenario (tests/integration/
librdkafka_suite.py: the build, the broker, the runner and its verdicts; `make librdkafka-tests` builds it)."""

from __future__ import annotations

from kbroker.tests.integration.librdkafka_suite import file_tests

runs, test_librdkafka_test_passes_against_kbroker = file_tests("default")
