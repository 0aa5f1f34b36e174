"""IncrementalAlterConfigs (44), v0-v1: SET, DELETE, APPEND and SUBTRACT on a topic's overrides, on
a group's (the GROUP resource, broker/group_configs.py), and on a layer of dynamic broker configs (the
BROKER resource, broker/dynamic_configs.py).

The operations are applied to the current overrides; the merged set is then validated and written in
one step (the catalogue's alter_topic_configs_async), so a request with one bad entry changes nothing. APPEND
and SUBTRACT are for list configs (cleanup.policy) and start from the default when the topic has no
override, as in Kafka; on other configs they are INVALID_CONFIG. An unknown operation is INVALID_REQUEST.

On a BROKER resource they work as Kafka 4.4's broker and controller do (apply_broker_ops): on Kafka's
LIST-typed broker settings (log.cleanup.policy, ssl.enabled.protocols, sasl.enabled.mechanisms,
metric.reporters, ...), starting from the layer's own value or else Kafka's default for the setting
(not the broker's static value, as Kafka's controller does); APPEND adds each item not already there,
SUBTRACT removes each item present (an absent one is no error), and the result is kept in the layer
even when empty or unchanged. A name Kafka's broker does not know (a listener-prefixed one too) is
INVALID_CONFIG "Unknown config name", a setting that is not a list INVALID_CONFIG; whether the setting
may change at run time is checked after, on the result, as for SET.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .alter_configs import alter_resources
from .describe_configs import LIST, RESOURCE_BROKER, RESOURCE_GROUP, TOPIC_CONFIGS
from ..kafka_settings import KAFKA_BROKER_LISTS, KAFKA_BROKER_SETTINGS
from ...coordinator.groups.group_configs import BY_NAME as GROUP_BY_NAME
from ...coordinator.groups.group_configs import LIST as GROUP_LIST
from ..network.router import RequestContext
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.incremental_alter_configs_request import AlterableConfig, IncrementalAlterConfigsRequest
from ...protocol.messages.incremental_alter_configs_request import AlterConfigsResource as IncrementalAlterResource
from ...protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

API_KEY = 44
VERSIONS = (0, 1)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def apply_ops(current: dict[str, str], ops: Sequence[AlterableConfig], defaults: dict[str, str],
              group: bool = False) -> dict[str, str]:
    """The overrides after `ops`; `group`: a GROUP resource's (Kafka words its refusals otherwise)."""
    new = dict(current)
    for op in ops:
        name, value = op.name, op.value
        if op.config_operation == SET:
            if value is None:
                raise KafkaError(f"Null value not supported for : {name}", ErrorCode.INVALID_REQUEST)
            new[name] = value
        elif op.config_operation == DELETE:
            new.pop(name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            if group:
                definition = GROUP_BY_NAME.get(name)
                if definition is None:
                    raise KafkaError(f"Unknown group config name: {name}", ErrorCode.INVALID_CONFIG)
                if definition.kind != GROUP_LIST:
                    raise KafkaError(f"Can't {verb.upper()} to key {name} because its type is not LIST.",
                                     ErrorCode.INVALID_CONFIG)
            meta = (LIST, "") if group else TOPIC_CONFIGS.get(name)
            if meta is None or meta[0] != LIST:
                raise KafkaError(f"Config value {verb} is not allowed for config key: {name}", ErrorCode.INVALID_CONFIG)
            if value is None:
                raise KafkaError(f"Null value not supported for : {name}", ErrorCode.INVALID_REQUEST)
            items = _split(new.get(name, defaults.get(name, "")))
            if op.config_operation == APPEND:
                items += [v for v in _split(value) if v not in items]
            else:
                removed = set(_split(value))
                items = [v for v in items if v not in removed]
            new[name] = ",".join(items)
        else:
            raise KafkaError(f"Unknown config operation {op.config_operation} for {name}", ErrorCode.INVALID_REQUEST)
    return new


def _java_split(value: str) -> list[str]:
    """Java's String.split(","): trailing empty items dropped, a leading or inner one kept."""
    parts = value.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def apply_broker_ops(current: dict[str, str], ops: Sequence[AlterableConfig]) -> dict[str, str]:
    """A layer of dynamic broker configs after `ops`, as Kafka 4.4's ConfigAdminManager checks them and
    its controller (ConfigurationControlManager.incrementalAlterConfigResource) applies them."""
    unknown_ops = [op for op in ops if op.config_operation not in (SET, DELETE, APPEND, SUBTRACT)]
    if unknown_ops:
        raise KafkaError(f"Unknown operations type {unknown_ops[0].config_operation}", ErrorCode.INVALID_REQUEST)
    nulls = [op.name for op in ops if op.config_operation != DELETE and op.value is None]
    if nulls:
        raise KafkaError(f"Null value not supported for : {', '.join(nulls)}", ErrorCode.INVALID_REQUEST)
    new = dict(current)
    for op in ops:
        name, value = op.name, op.value or ""
        if op.config_operation == SET:
            new[name] = value
        elif op.config_operation == DELETE:
            new.pop(name, None)
        else:
            verb = "append" if op.config_operation == APPEND else "subtract"
            if name not in KAFKA_BROKER_SETTINGS:
                raise KafkaError(f"Unknown config name: {name}", ErrorCode.INVALID_CONFIG)
            if name not in KAFKA_BROKER_LISTS:
                raise KafkaError(f"Config value {verb} is not allowed for config key: {name}", ErrorCode.INVALID_CONFIG)
            base = new[name] if name in new else KAFKA_BROKER_LISTS[name]
            items = [p for p in (base or "").split(",") if p]
            for item in _java_split(value):
                if op.config_operation == APPEND and item not in items:
                    items.append(item)
                elif op.config_operation == SUBTRACT and item in items:
                    items.remove(item)
            new[name] = ",".join(items)
    return new


def failed_response(_ctx: RequestContext, request: IncrementalAlterConfigsRequest,
                    error: int) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterConfigsResourceResponse(error_code=error, error_message=None, resource_type=r.resource_type,
                                     resource_name=r.resource_name)
        for r in request.resources
    ])


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    defaults = {e.name: e.value for e in ctx.broker.catalogue.default_config.describe()}

    def change_for(res: IncrementalAlterResource) -> Callable[[dict[str, str]], dict[str, str]]:
        if res.resource_type == RESOURCE_GROUP:
            group_defaults = ctx.broker.group_configs.defaults
            return lambda current: apply_ops(current, res.configs, group_defaults, group=True)
        if res.resource_type == RESOURCE_BROKER:
            return lambda current: apply_broker_ops(current, res.configs)
        return lambda current: apply_ops(current, res.configs, defaults)

    responses = await alter_resources(ctx, request.resources, AlterConfigsResourceResponse, change_for,
                                request.validate_only)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
