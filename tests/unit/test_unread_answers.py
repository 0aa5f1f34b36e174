"""broker/network/unread_answers.py: what a Fetch may read while other clients' answers wait untaken."""

from __future__ import annotations

from kbroker.broker.network.unread_answers import UnreadAnswers


def test_fetches_shrink_past_the_limit_and_grow_back_as_answers_are_taken() -> None:
    unread = UnreadAnswers(fetch_max_bytes=100, factor=4)
    assert unread.limit == 400 and unread.fetch_bytes(100) == 100
    unread.read("a:1", 100)
    unread.read("a:1", 150)  # a second answer to the same connection before it took the first
    unread.read("b:2", 100)
    assert unread.held == 350 and unread.holds("a:1") and not unread.holds("c:3")
    assert unread.fetch_bytes(100) == 50  # what is left of the allowance
    unread.read("c:3", 60)
    assert unread.fetch_bytes(100) == 0  # a Fetch still gets its first batch (read_partitions)
    unread.taken("a:1")
    assert unread.held == 160 and unread.fetch_bytes(100) == 100
    unread.taken("a:1")  # taken twice, or a connection that held nothing: no change
    unread.taken("zz:9")
    assert unread.held == 160
    unread.read("d:4", 0)
    assert not unread.holds("d:4")
