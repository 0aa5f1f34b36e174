"""Kafka's rules for topic names (clients' `Topic.validate`, `Topic.INTERNAL_TOPICS`), used by whoever
names a topic: the catalogue and the storage engine, the start-up topics, the handlers."""

from __future__ import annotations

import re

from .errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

# Kafka's internal topics (Topic.INTERNAL_TOPICS): clients may not produce to or delete them, and
# Metadata flags them. Other names starting with "__" are ordinary user topics, as in Kafka.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class InvalidTopicError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: 1..249 characters from [a-zA-Z0-9._-], and not "." or ".."."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def collision_key(name: str) -> str:
    """Kafka refuses topics whose names differ only by '.' vs '_' (they collide in metric names)."""
    return name.replace(".", "_")
