"""What the share state RPCs' handlers (83-87) share: Kafka's error messages in their answers, and
the per-topic shape of the answers of the writing three."""

from __future__ import annotations

from typing import Any, Callable

from ...protocol.errors import ErrorCode

E = ErrorCode
# Errors.message() of the codes a whole request is refused with (Kafka's getErrorResponse puts it in
# each partition's ErrorMessage); the coordinator's own answers carry theirs (share_state_rpc.py).
_MESSAGES = {
    E.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    E.UNSUPPORTED_VERSION: "The version of API is not supported.",
    E.INVALID_REQUEST: ("This most likely occurs because of a request being malformed by the client library or "
                        "the message was sent to an incompatible broker. See the broker logs for more details."),
}


def error_message(error: int) -> str | None:
    return _MESSAGES.get(ErrorCode(error)) if error else None


def grouped(keys: list[tuple[Any, Any]], answers: list[Any], partition_result: Callable[..., Any],
            topic_result: Callable[..., Any]) -> list[Any]:
    """Each (topic id, partition entry)'s answer (error and message), per topic in request order."""
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, p), a in zip(keys, answers):
        by_topic.setdefault(topic_id, []).append(partition_result(p.partition, a.error, a.message))
    return [topic_result(topic_id, parts) for topic_id, parts in by_topic.items()]
