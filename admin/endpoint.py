"""Where kbroker's HTTP endpoint (`--metrics-listen`: /ready, group history, test controls) answers,
found from the broker the CLI talks to instead of assumed.

In order: `--admin-url`, then KBROKER_ADMIN_URL, then the broker's own word: kbroker reports the
endpoint as the broker config `kbroker.http.endpoint` (DescribeConfigs of the broker, with the host
the client reached it by when it listens on every interface). Any other broker, or a kbroker
without `--metrics-listen`, has none, and the error says what to give instead.

Only the finding lives here; how a request to the endpoint is made (and authenticated) is
groups.http_json's.
"""

from __future__ import annotations

import os

from ..protocol.errors import ErrorCode
from ..protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from .client import Admin, AdminError, error_name

ENV = "KBROKER_ADMIN_URL"
CONFIG_NAME = "kbroker.http.endpoint"
BROKER_RESOURCE = 4


def admin_url(given: str | None, bootstrap: str, timeout: float) -> str:
    """The endpoint to use: the one given, else the one the broker at `bootstrap` reports."""
    if given:
        return given
    if os.environ.get(ENV):
        return os.environ[ENV]
    return discover(bootstrap, timeout)


def discover(bootstrap: str, timeout: float) -> str:
    with Admin(bootstrap, timeout) as admin:
        url = reported_url(admin)
    if url is None:
        raise AdminError(f"broker {bootstrap} reports no HTTP endpoint (a kbroker started without --metrics-listen, "
                         f"or another broker): start it with --metrics-listen HOST:PORT, or give --admin-url URL")
    return url


def reported_url(admin: Admin) -> str | None:
    """`kbroker.http.endpoint` of the broker `admin` is connected to, None if it reports none. The
    broker resource is named by node id: the connected broker's is the one it does not refuse."""
    from ..protocol.messages.metadata_request import MetadataRequest

    nodes = [b.node_id for b in admin.conn.request(3, MetadataRequest(topics=[], allow_auto_topic_creation=False)).brokers]
    for node in nodes:
        request = DescribeConfigsRequest(resources=[DescribeConfigsResource(BROKER_RESOURCE, str(node), [CONFIG_NAME])],
                                         include_synonyms=False, include_documentation=False)
        result = admin.conn.request(32, request).results[0]
        if result.error_code == ErrorCode.INVALID_REQUEST and len(nodes) > 1:
            continue  # another broker's id: ask with the next
        if result.error_code:
            raise AdminError(f"broker {admin.bootstrap}: DescribeConfigs failed with {error_name(result.error_code)}")
        return next((c.value for c in result.configs if c.name == CONFIG_NAME and c.value), None)
    return None
