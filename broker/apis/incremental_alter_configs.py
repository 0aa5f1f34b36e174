"""IncrementalAlterConfigs (44), v0-v1: SET, DELETE, APPEND and SUBTRACT on a topic's overrides, and on
a group's (the GROUP resource, broker/group_configs.py).

The operations are applied to the current overrides; the merged set is then validated and written in
one step (the catalogue's alter_topic_configs_async), so a request with one bad entry changes nothing. APPEND
and SUBTRACT are for list configs (cleanup.policy) and start from the default when the topic has no
override, as in Kafka; on other configs they are INVALID_CONFIG. An unknown operation is INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .alter_configs import alter_resources
from .describe_configs import LIST, RESOURCE_GROUP, TOPIC_CONFIGS
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
        return lambda current: apply_ops(current, res.configs, defaults)

    responses = await alter_resources(ctx, request.resources, AlterConfigsResourceResponse, change_for,
                                request.validate_only)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
