"""The test-runner of only the suite's tests (tests/integration/librdkafka_suite.py write_stubs): the
sources librdkafka's tests/Makefile compiles, and a failing stub for every other test test.c names."""

from __future__ import annotations

from pathlib import Path

from kbroker.tests.integration.librdkafka_suite import CASES, write_stubs


def test_only_the_suites_tests_are_compiled_and_the_others_are_failing_stubs(tmp_path: Path) -> None:
    declared = ["0001_multiobj", "0077_compaction", "0135_sasl_credentials", "0173_share_consumer_commit_async",
                "0173_share_consumer_commit_async_local", "0186_share_consumer_fatal_error"]
    (tmp_path / "test.c").write_text("".join(f"_TEST_DECL({name});\n" for name in declared))
    for name in ("0001-multiobj.c", "0077-compaction.c", "0077-compaction.o", "0135-sasl_credentials.cpp",
                 "0173-share_consumer_commit_async.c", "0186-share_consumer_fatal_error.c", "test.c"):
        (tmp_path / name).touch()

    write_stubs(tmp_path)

    assert {"0077", "0135", "0173"} <= {c.number for c in CASES} and not {"0001", "0186"} & {c.number for c in CASES}
    assert (tmp_path / "kbroker-tests.mk").read_text() == (
        "override TESTSRCS_C = 0077-compaction.c 0173-share_consumer_commit_async.c stubs.c\n"
        "override TESTSRCS_CXX = 0135-sasl_credentials.cpp\n")
    stubs = (tmp_path / "stubs.c").read_text()
    assert "int main_0001_multiobj(int argc, char **argv)" in stubs
    assert "int main_0186_share_consumer_fatal_error(int argc, char **argv)" in stubs
    assert stubs.count("TEST_FAIL(\"not built into this test-runner\")") == 2  # the suite's own are compiled
