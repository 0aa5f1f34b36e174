"""The one place error answers are shaped (Kafka's `AbstractRequest.getErrorResponse`).

A whole request answered with one error code has one shape per API: its route's `failed_response`
(the handler module's own, else `top_level_error`: the response with only its top-level
`error_code`, for the versions that have one). Everything that answers a whole request with an
error goes through here:

- a handler's own refusal and an ACL check's (`refuse`, with Kafka's message where the response
  carries one);
- the server's answer to a handler that raised or a response that cannot be encoded
  (answers.failed_answer: UNKNOWN_SERVER_ERROR through the route's shape; the group APIs' own
  wrapper, apis/group_wire.py, passes their `failed_response` the same way);
- a version we do not serve (`unsupported_version_answer`; ApiVersions per KIP-511,
  `unsupported_api_versions`).

Errors of single partitions, groups or resources inside an answer are the handler's to place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol import framing
from ...protocol.errors import ErrorCode
from ...protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from ...protocol.spec import in_range

if TYPE_CHECKING:
    from .router import RequestContext


def _top_level_field(api_key: int, name: str) -> Any:
    spec = framing.response_spec(api_key)
    if spec is None:
        return None
    return next((f for f in spec.struct.fields if f.name == name), None)


def top_level_error(api_key: int, version: int, error: int) -> Any:
    """The response of `version` with only its top-level `error_code` set; None when that version
    has none (an empty answer would read as success: the caller closes instead)."""
    spec = framing.response_spec(api_key)
    field = _top_level_field(api_key, "error_code")
    if spec is None or field is None or version not in spec.versions or not in_range(version, field.versions):
        return None
    body = spec.struct.cls()
    body.error_code = error
    return body


def refuse(ctx: RequestContext, request: Any, error: int, message: str | None = None) -> Any:
    """The whole request refused with `error`, in its API's shape (its route's `failed_response`),
    with `message` in the top-level `error_message` where this version of the response has one."""
    route = ctx.broker.router.route(ctx.api_key)
    assert route is not None, "a refusal of an api this broker serves"
    body = route.failed_response(ctx, request, ErrorCode(error))
    if body is not None and message is not None:
        field = _top_level_field(ctx.api_key, "error_message")
        if field is not None and in_range(ctx.api_version, field.versions):
            body.error_message = message
    return body


def unsupported_version_answer(api_key: int, version: int, correlation_id: int) -> bytes | None:
    """UNSUPPORTED_VERSION in the response of the version the client sent, when we know that
    version's layout and it has a top-level error code; None when only closing is left (a version
    newer than our definitions, or a response whose errors live only per partition or per group,
    where an empty answer would read as success)."""
    body = top_level_error(api_key, version, ErrorCode.UNSUPPORTED_VERSION)
    return None if body is None else framing.encode_response(api_key, version, correlation_id, body)


def unsupported_api_versions(served: tuple[int, int], correlation_id: int) -> bytes:
    """KIP-511: an ApiVersions of a version we do not serve is answered in v0, so any client can
    read the error and the range we serve (`served`), and retry lower."""
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=[ApiVersion(framing.API_VERSIONS_KEY, *served)])
    return framing.encode_response(framing.API_VERSIONS_KEY, 0, correlation_id, body)
