"""What the ACL checks of broker/security/api_checks.py share: Kafka's error codes and messages for a
refusal, and the request-splitting most per-resource checks are built from."""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..network.router import RequestContext, then
from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .service import Security

Call = Callable[[Any], Awaitable[Any]]
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
DENIED_MESSAGE = {GROUP_DENIED: "Group authorization failed.", TOPIC_DENIED: "Topic authorization failed.",
                   TXN_DENIED: "Transactional Id authorization failed."}  # Kafka's Errors messages


def topic_names_by_id(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in ctx.broker.catalogue.topics().items()}


async def split(ctx: RequestContext, request: Any, call: Call, sec: Security, *, items: str, allowed: Callable[[Any], bool],
                 denied_entry: Callable[[Any], Any], answer_list: str,
                 when_none_left: Callable[[], Any] | None = None) -> Any:
    """`when_none_left`: for APIs where an empty list means "everything", the answer to give (before
    the error entries) when every named resource is refused, instead of calling the handler."""
    kept: list[Any] = []
    refused: list[Any] = []
    for item in getattr(request, items):
        (kept if allowed(item) else refused).append(item)
    if not refused:
        return await call(request)
    if not kept and when_none_left is not None:
        result = when_none_left()
    else:
        result = await call(dataclasses.replace(request, **{items: kept}))

    def merge(body):
        getattr(body, answer_list).extend(denied_entry(item) for item in refused)
        return body
    return then(result, merge)


class LazyModule:
    """A module of protocol/messages/, imported with the first use of one of its names; then its
    names are this object's own attributes (no lookup through __getattr__ after the first)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(f"...protocol.messages.{self._name}", __package__)
        self.__dict__.update(vars(module))
        return getattr(module, attr)
