"""broker/apis/repeats.py: answers to ids named more than once."""

from __future__ import annotations

import pytest

from kbroker.broker.apis.repeats import REPEATS_BYTES, approximate_size, distinct, in_request_order
from kbroker.broker.network.server import CloseConnection
from kbroker.protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember


def _group(group_id: str, metadata: bytes) -> DescribedGroup:
    return DescribedGroup(error_code=0, group_id=group_id, group_state="Stable", protocol_type="consumer",
                          protocol_data="range", members=[DescribedGroupMember(
                              member_id="m", client_id="c", client_host="/h", member_metadata=metadata,
                              member_assignment=b"")])


def test_each_id_is_answered_in_its_place_by_one_object() -> None:
    ids = ["b", "a", "b", "c", "a"]
    assert distinct(ids) == ["b", "a", "c"]
    answers = {i: _group(i, b"x") for i in distinct(ids)}
    out = in_request_order(ids, answers)
    assert [g.group_id for g in out] == ids
    assert out[0] is out[2] and out[1] is out[4]


def test_the_bytes_repeats_add_are_bounded() -> None:
    big = _group("g", bytes(100_000))
    assert 100_000 < approximate_size(big) < 100_300
    # Ten copies of 100 kB add about 1 MB: allowed; eleven more than that: refused.
    assert len(in_request_order(["g"] * 10, {"g": big})) == 10
    with pytest.raises(CloseConnection, match="named more than once"):
        in_request_order(["g"] * (REPEATS_BYTES // 100_000 + 2), {"g": big})
    # Distinct ids are never refused, however large their answers.
    many = {str(i): big for i in range(50)}
    assert len(in_request_order(list(many), many)) == 50
