"""The simultaneous-MT benchmark's simulation, with the word-for-word fake engine.

A fake timer makes every update take exactly 50 ms, so the whole timeline (when
updates are sent, what they commit, when answers arrive) is worked out by hand.
"""

from __future__ import annotations

import itertools

import pytest

from bench.mt_data import Sentence, SourceWord
from bench.mt_metrics import Emission, sentence_laal
from bench.mt_simul_summary import markdown, summarize
from bench.mt_simulation import asr_state, next_asr_event, run_document, simulate
from dragoman.streaming.alignatt import AlignAttParams
from harness.mt_fakes import FakeEngine

REFERENCE = "Hallo Welt, wie geht es dir?"
#: The timeline below is worked out for this policy.
PRESETS = {"low_latency": AlignAttParams(frontier_margin=1, max_draft_tokens=16, history_pairs=2)}


class StepTimer:
    """Advances 50 ms per reading: every timed span lasts 50 ms."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.05
        return self.t


def _sentence() -> Sentence:
    # A pause after "how": 1200 -> 2400 ms.
    timed = [("Hello", 400), ("world,", 800), ("how", 1200), ("are", 2400), ("you?", 2800)]
    words = tuple(SourceWord(text, end - 300, end) for text, end in timed)
    return Sentence("s1", "Hello world, how are you?", REFERENCE, words, 2800.0, "test")


def test_asr_state_holds_back_the_tail_until_a_pause() -> None:
    ends = [400.0, 800.0, 1200.0]
    assert asr_state(ends, 300, tail_words=2, pause_commit_ms=600) == (0, 0)
    assert asr_state(ends, 1300, tail_words=2, pause_commit_ms=600) == (1, 3)
    assert asr_state(ends, 1800, tail_words=2, pause_commit_ms=600) == (3, 3)
    assert next_asr_event(ends, 900, pause_commit_ms=600) == 1200
    assert next_asr_event(ends, 1300, pause_commit_ms=600) == 1800


def test_simulation_timeline_fast_path_and_latency() -> None:
    engine = FakeEngine()
    run = simulate(
        _sentence(),
        engine,
        direction="en-de",
        preset="low_latency",
        tail_words=2,
        pause_commit_ms=600,
        presets=PRESETS,
        timer=StepTimer(),
    )
    # Sends at 400, 900 (nothing accessible yet), 1400 (commits "Hallo"), 1900 (the
    # pause commits "how": a fast-path re-cut releases "Welt,"), 2400 (nothing new
    # accessible); the final goes at the end of the source, 2800.
    assert run.emissions == [
        Emission(400, 450, ""),
        Emission(900, 950, ""),
        Emission(1400, 1450, "Hallo"),
        Emission(1900, 1950, "Hallo Welt,"),
        Emission(2400, 2450, "Hallo Welt,"),
        Emission(2800, 2850, "Hallo Welt, wie geht es?"),
    ]
    assert run.simul_text == run.offline_text == "Hallo Welt, wie geht es?"
    assert run.engine_calls == 5  # four partial drafts and the final pass
    assert (run.commits, run.fast_path_commits) == (2, 1)
    assert engine.forgotten == ["bench-s1"]

    latency = sentence_laal(run.emissions, run.simul_text, REFERENCE, "de", 2800)
    assert latency is not None
    # Units at 1400, 1900, 2800 (ideal); rate 2800 / 6; the third reaches |X|.
    assert latency.ideal_ms == pytest.approx((1400 + 1900 - 2800 / 6 + 2800 - 2 * 2800 / 6) / 3)
    assert latency.computation_aware_ms == pytest.approx((1450 + 1950 - 2800 / 6 + 2850 - 2 * 2800 / 6) / 3)


def test_summary_and_table() -> None:
    run = simulate(
        _sentence(),
        FakeEngine(),
        direction="en-de",
        preset="low_latency",
        tail_words=2,
        presets=PRESETS,
        timer=StepTimer(),
    )
    summary = summarize("en-de", "test", [run])
    assert summary.bleu_simul == pytest.approx(summary.bleu_offline)
    assert summary.bleu_ratio == pytest.approx(1.0)
    assert summary.fast_path_share == pytest.approx(0.5)
    table = markdown([summary], "header")
    assert "| en-de | test (test) | 1 |" in table
    assert table.rstrip().endswith(f"| {summary.doc_bleu_simul:.1f} | {summary.doc_bleu_offline:.1f} |")


def _second_sentence() -> Sentence:
    timed = [("the", 400), ("house", 800), ("is", 1200), ("red.", 1600)]
    words = tuple(SourceWord(text, end - 300, end) for text, end in timed)
    return Sentence("s2", "the house is red.", "die Haus ist rot.", words, 1600.0, "test")


def test_a_document_streams_its_lines_through_one_session_with_history() -> None:
    engine = FakeEngine()
    runs = run_document(
        [_sentence(), _second_sentence()],
        engine,
        direction="en-de",
        preset="low_latency",
        line_gap_ms=800,
        tail_words=2,
        presets=PRESETS,
        timer=StepTimer(),
    )
    assert [run.simul_text for run in runs] == ["Hallo Welt, wie geht es?", "die Haus ist rot."]
    # Each line keeps its own timeline for LAAL: the second starts at its own 0.
    assert runs[1].emissions[0].ideal_ms == 400
    # One session, forgotten once at the end of the talk.
    assert engine.forgotten == ["bench-doc-en-de"]
    first_pair = ("Hello world, how are you?", "Hallo Welt, wie geht es?")
    second_line = [r for r in engine.requests if r.source_words[0] == "the"]
    # The streamed requests carry the first line and its committed translation; the
    # offline baseline (the last request) carries the first line's offline translation.
    assert second_line[0].history == (first_pair,)
    assert second_line[-1].history == (("Hello world, how are you?", runs[0].offline_text),)
    assert all(r.history == () for r in engine.requests if r.source_words[0] == "Hello")

    summary = summarize("en-de", "test", runs)
    # Joined into one segment, the document's BLEU differs from the per-line corpus BLEU.
    assert summary.doc_bleu_simul == pytest.approx(summary.doc_bleu_offline)
    assert summary.doc_bleu_simul != pytest.approx(summary.bleu_simul)


def test_streamed_commits_are_emissions_of_their_own_and_translate_the_same() -> None:
    """`--stream-commits`: what an engine pass commits is an emission at the time of that pass,
    before the update's answer; the translation is the one sent at once."""
    text = "Hello world, how are you? the big house is red."
    words = tuple(SourceWord(w, 400 * i + 100, 400 * i + 400) for i, w in enumerate(text.split()))
    sentence = Sentence("s3", text, "Hallo Welt, wie geht es? Das große Haus ist rot.", words, 4000.0, "test")
    at_once, streamed = (
        simulate(
            sentence,
            FakeEngine(),
            direction="en-de",
            preset="low_latency",
            tail_words=1,
            presets=PRESETS,
            timer=StepTimer(),
            stream_commits=stream_commits,
        )
        for stream_commits in (False, True)
    )
    assert streamed.simul_text == at_once.simul_text == "Hallo Welt, wie geht es? die große Haus ist rot."
    texts = [e.text for e in streamed.emissions]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    # The update at 2400 ms: its draft's pass committed "geht" before the answer added "es?".
    assert [e.text for e in streamed.emissions if e.ideal_ms == 2400] == [
        "Hallo Welt, wie geht",
        "Hallo Welt, wie geht es?",
    ]
    assert [e.text for e in at_once.emissions if e.ideal_ms == 2400] == ["Hallo Welt, wie geht es?"]
