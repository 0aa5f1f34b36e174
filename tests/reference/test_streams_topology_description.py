"""StreamsGroupTopologyDescriptionUpdate (93), compared with Apache Kafka 4.4: both advertise v0, and
without a topology description plugin (Kafka's default; kbroker has none) both refuse every push the
same way, whatever the group, the member or the description (UNSUPPORTED_VERSION and its message).
The differential wire level does not craft this API yet (test_differential_runner.SCENARIO_CHECKED)."""

from __future__ import annotations

import pytest

from kbroker.protocol.messages.api_versions_request import ApiVersionsRequest
from kbroker.protocol.messages.streams_group_topology_description_update_request import (
    StreamsGroupTopologyDescriptionUpdateRequest,
    TopologyDescription,
    TopologyDescriptionNode,
    TopologyDescriptionSubtopology,
)
from kbroker.tests.integration.wire import Wire

PUSHES = {
    "an unknown group": StreamsGroupTopologyDescriptionUpdateRequest(
        group_id="std-nobody", member_id="std-member", topology_epoch=0,
        topology_description=TopologyDescription(subtopologies=[], global_stores=[])),
    "empty ids": StreamsGroupTopologyDescriptionUpdateRequest(
        group_id="", member_id="", topology_epoch=-1,
        topology_description=TopologyDescription(subtopologies=[], global_stores=[])),
    "a word count's description": StreamsGroupTopologyDescriptionUpdateRequest(
        group_id="std-wordcount", member_id="std-member", topology_epoch=3,
        topology_description=TopologyDescription(global_stores=[], subtopologies=[TopologyDescriptionSubtopology(
            subtopology_id="0", nodes=[
                TopologyDescriptionNode(name="KSTREAM-SOURCE-0000000000", node_type=1, source_topics=["words"],
                                        stores=[], successors=["KSTREAM-SINK-0000000001"]),
                TopologyDescriptionNode(name="KSTREAM-SINK-0000000001", node_type=3, source_topics=[],
                                        sink_topic="counts", stores=[], successors=[])])])),
}


@pytest.mark.parametrize("what", sorted(PUSHES))
def test_a_push_is_answered_as_kafka_answers_it(kafka_reference, kbroker, what) -> None:
    answers = []
    for bootstrap in (kafka_reference.bootstrap, kbroker.bootstrap):
        wire = Wire(bootstrap)
        try:
            versions = wire.call(18, 3, ApiVersionsRequest(client_software_name="std", client_software_version="1"))
            assert [(a.min_version, a.max_version) for a in versions.api_keys if a.api_key == 93] == [(0, 0)]
            answer = wire.call(93, 0, PUSHES[what])
            answers.append((answer.error_code, answer.error_message))
        finally:
            wire.close()
    kafka, ours = answers
    assert ours == kafka
    assert kafka == (35, "The broker has no streams group topology description plugin configured.")
