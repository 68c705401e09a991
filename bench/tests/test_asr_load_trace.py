"""The load benchmark's per-session trace: lags on the session's timeline, for one item the
client commits and for the items server_vad cuts."""

from __future__ import annotations

import pytest

from bench.asr_load import COMMITTED, COMPLETED, DELTA, PARTIAL, SPEECH_STARTED, Trace
from bench.audio import RATE


def _trace(server_commits: bool) -> Trace:
    trace = Trace("s", "ref", 10.0, chunk_seconds=2.0, server_commits=server_commits)
    # One 100 ms append every 100 ms, from t = 100.1 s: audio up to x s was sent at 100 + x.
    trace.sent = [(round(k * 0.1 * RATE), 100.0 + k * 0.1) for k in range(1, 101)]
    trace.committed = 110.0
    return trace


def test_one_committed_item_counts_from_the_session_start() -> None:
    trace = _trace(server_commits=False)
    trace.received = [
        (102.5, {"type": PARTIAL, "item_id": "a", "audio_seconds": 2.3}),
        (103.0, {"type": DELTA, "item_id": "a", "delta": "hello"}),
        (110.4, {"type": COMPLETED, "item_id": "a", "transcript": "hello world"}),
    ]
    assert trace.boundary_lags == pytest.approx([0.5])  # boundary 2 s, sent at 102.0
    assert trace.partial_lags == pytest.approx([0.2])
    assert trace.final_lags == pytest.approx([0.4])  # from the client's commit
    assert trace.transcript == "hello world" and not trace.revised


def test_server_vad_items_count_from_their_speech_start_and_commit() -> None:
    trace = _trace(server_commits=True)
    trace.received = [
        (100.1, {"type": SPEECH_STARTED, "item_id": "a", "audio_start_ms": 0}),
        (102.4, {"type": PARTIAL, "item_id": "a", "audio_seconds": 2.0}),
        (104.0, {"type": COMMITTED, "item_id": "a"}),
        (104.3, {"type": COMPLETED, "item_id": "a", "transcript": "one"}),
        (105.0, {"type": SPEECH_STARTED, "item_id": "b", "audio_start_ms": 4500}),
        (106.9, {"type": PARTIAL, "item_id": "b", "audio_seconds": 2.1}),
        (107.0, {"type": DELTA, "item_id": "b", "delta": "tree"}),
        (109.0, {"type": COMMITTED, "item_id": "b"}),
        (109.6, {"type": COMPLETED, "item_id": "b", "transcript": " two"}),
    ]
    # b's boundary is 2 s into b, 6.5 s into the session: sent at 106.5.
    assert trace.boundary_lags == pytest.approx([0.4, 0.4])
    assert trace.final_lags == pytest.approx([0.3, 0.6])  # from each server commit
    assert trace.transcript == "one two"
    assert trace.revised  # b's delta "tree" is not where its transcript starts
