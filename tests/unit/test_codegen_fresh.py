"""The checked-in `protocol/messages/` is exactly what `make codegen` produces from the vendored JSON."""

from __future__ import annotations

from kbroker.tools import codegen


def test_generated_messages_are_fresh() -> None:
    files = codegen.generate()
    stale = [name for name, text in files.items()
             if not (codegen.OUT_DIR / name).exists() or (codegen.OUT_DIR / name).read_text() != text]
    extra = {p.name for p in codegen.OUT_DIR.glob("*.py")} - set(files)
    assert not stale and not extra, f"run `make codegen`: stale {stale}, extra {sorted(extra)}"


def test_every_broker_api_has_request_and_response_modules() -> None:
    from kbroker.broker.app import build_router
    from kbroker.protocol import framing

    for api_key, _, _ in build_router().supported():
        assert framing.request_spec(api_key) is not None
        assert framing.response_spec(api_key) is not None


def test_comment_stripping_keeps_slashes_inside_strings() -> None:
    assert codegen.strip_comments('{"a": "x//y"} // note\n') == '{"a": "x//y"} \n'
