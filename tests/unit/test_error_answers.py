"""broker/network/error_answers.py: the one place a whole request's error answer is shaped. The
router's default, the unsupported-version answer, the handlers' refusals and the ACL checks' all
come from it (Kafka's AbstractRequest.getErrorResponse)."""

from __future__ import annotations

import importlib
import types

import pytest

from kbroker.broker.apis import SERVED
from kbroker.broker.app import build_router
from kbroker.broker.network.error_answers import refuse, top_level_error, unsupported_version_answer
from kbroker.protocol import framing
from kbroker.protocol.errors import ErrorCode as E

ROUTER = build_router(acl_checks=False)


def _ctx(api_key: int, version: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(api_key=api_key, api_version=version, broker=types.SimpleNamespace(router=ROUTER))


DEFAULT_SHAPED = [key for key, (name, _, _) in sorted(SERVED.items())
                  if not hasattr(importlib.import_module(f"kbroker.broker.apis.{name}"), "failed_response")]


def test_some_apis_take_the_default_shape() -> None:
    assert 18 in DEFAULT_SHAPED and 25 in DEFAULT_SHAPED  # ApiVersions, AddOffsetsToTxn


@pytest.mark.parametrize("api_key", DEFAULT_SHAPED)
def test_an_api_without_its_own_shape_gets_the_top_level_error(api_key: int) -> None:
    route = ROUTER.route(api_key)
    for version in range(route.min_version, route.max_version + 1):
        ctx = _ctx(api_key, version)
        assert route.failed_response(ctx, None, E.NOT_CONTROLLER) == top_level_error(api_key, version, E.NOT_CONTROLLER)


def test_an_unsupported_version_gets_the_same_top_level_shape() -> None:
    frame = unsupported_version_answer(22, 6, 9)  # InitProducerId v6: a top-level error code
    assert frame is not None
    _, body = framing.decode_response(22, 6, frame[4:])
    assert body == top_level_error(22, 6, E.UNSUPPORTED_VERSION)
    assert unsupported_version_answer(15, 6, 1) is None  # DescribeGroups: errors only per group


def test_a_refusal_carries_its_message_where_the_version_has_one() -> None:
    v0 = refuse(_ctx(48, 0), None, E.INVALID_REQUEST, "why")
    assert (v0.error_code, v0.error_message) == (E.INVALID_REQUEST, "why")
    sasl_v0 = refuse(_ctx(36, 0), None, E.ILLEGAL_SASL_STATE, "not here")
    assert sasl_v0.error_message == "not here"
    assert refuse(_ctx(25, 0), None, E.INVALID_GROUP_ID, "no field for it").error_code == E.INVALID_GROUP_ID


@pytest.mark.parametrize("version", [0, 1])
def test_describe_client_quotas_refused_has_null_entries_as_kafka(version: int) -> None:
    """Kafka's DescribeClientQuotasRequest.getErrorResponse sets entries to null; the handler's own
    INVALID_REQUEST and an ACL refusal (CLUSTER_AUTHORIZATION_FAILED) now share that shape."""
    for error in (E.INVALID_REQUEST, E.CLUSTER_AUTHORIZATION_FAILED):
        body = ROUTER.route(48).failed_response(_ctx(48, version), None, error)
        frame = framing.encode_response(48, version, 1, body)
        _, decoded = framing.decode_response(48, version, frame[4:])
        assert decoded.entries is None and decoded.error_code == error
