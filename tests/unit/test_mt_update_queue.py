"""The MT session's pending updates: one partial (latest wins), sticky bounded finals."""

from __future__ import annotations

from dragoman.sessions.mt.events import Update
from dragoman.sessions.mt.update_queue import UpdateQueue


def update(seq: int, utterance: int, *, final: bool = False) -> Update:
    return Update(seq, utterance, (), ("word",), clock_ms=100.0 * seq, is_final=final)


def drain(queue: UpdateQueue) -> list[int]:
    seqs = []
    while queue:
        seqs.append(queue.head.seq)
        queue.pop()
    return seqs


def test_a_new_partial_replaces_the_queued_one() -> None:
    queue = UpdateQueue(max_finals=4)
    for seq in (1, 2, 3):
        assert queue.push(update(seq, 0))
    assert queue.coalesced == 2
    assert drain(queue) == [3]


def test_a_final_drops_its_own_utterances_partial_and_keeps_its_place() -> None:
    queue = UpdateQueue(max_finals=4)
    queue.push(update(1, 0, final=True))
    queue.push(update(2, 1))
    queue.push(update(3, 1, final=True))
    queue.push(update(4, 2))
    assert drain(queue) == [1, 3, 4]
    assert queue.coalesced == 1


def test_a_final_leaves_another_utterances_partial_queued() -> None:
    queue = UpdateQueue(max_finals=4)
    queue.push(update(1, 0))
    queue.push(update(2, 1, final=True))
    assert drain(queue) == [1, 2] and queue.coalesced == 0


def test_finals_past_the_bound_are_refused_and_change_nothing() -> None:
    queue = UpdateQueue(max_finals=2)
    assert queue.push(update(1, 0, final=True)) and queue.push(update(2, 1, final=True))
    queue.push(update(3, 2))
    assert not queue.push(update(4, 2, final=True))
    assert drain(queue) == [1, 2, 3]
