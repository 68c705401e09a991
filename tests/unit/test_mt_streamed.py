"""Streaming MT jobs: what AlignAtt commits of a draft goes out pass by pass, before the draft
ends, and the job's result goes on from there (no model, no socket)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt import draft_loop
from dragoman.engines.mt.base import MTDraft
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.errors import EngineFailure
from dragoman.sessions.mt.events import JobKind, MTJob, Translation
from tests.unit.test_mt_session import Driver


def prefix(draft: MTDraft, tokens: int) -> MTDraft:
    """The draft as a pass before its end saw it (a final one has no attention)."""
    attention = None if draft.attention is None else draft.attention[:tokens]
    return MTDraft(draft.token_ids[:tokens], attention, finished=False)


def next_job(d: Driver) -> MTJob:
    job = d.session.next_job()
    assert job is not None
    return job


def run_streaming(d: Driver) -> list[list[Translation]]:
    """Every job as a streaming engine runs it: its draft after each token, then the result.
    What the session sent after each of those, per job."""
    sent: list[list[Translation]] = []
    while (job := d.session.next_job()) is not None:
        assert job.streaming is (job.kind is not JobKind.PREFILL)
        full = d.engine.draft(job.request)
        for tokens in range(1, len(full.token_ids) if job.streaming else 0):
            d.session.job_progress(job, prefix(full, tokens))
        d.session.job_done(job, full)
        sent.append([e for e in d.take() if isinstance(e, Translation)])
    return sent


UPDATES: list[tuple[list[str], list[str]]] = [
    (["Hello", "world,", "how"], ["are", "you?"]),
    (["Hello", "world,", "how", "are"], ["you?"]),
    (["the", "big", "street", "is"], ["red."]),
]


def test_a_pass_commits_what_the_draft_so_far_allows_and_the_result_goes_on_from_there() -> None:
    d = Driver(stream_commits=True)
    d.update(*UPDATES[0])
    (sent,) = run_streaming(d)
    # "Hallo" and "Hallo Welt," wait: three words are the least the copy check decides on.
    # "wie" goes out once the next token shows it whole; "geht" attends to the tail.
    assert [(t.committed_delta, t.stop_reason) for t in sent] == [
        ("Hallo Welt,", "alignatt:streamed"),
        (" wie", "alignatt:streamed"),
        ("", "alignatt:attention_frontier"),
    ]
    assert {t.seq for t in sent} == {1}
    assert sent[-1].committed_text == "Hallo Welt, wie" and sent[-1].buffer_text == "geht es?"
    assert d.session.stats["streamed"] == 2


def test_streaming_commits_what_the_whole_draft_would_have_committed() -> None:
    streamed, whole = Driver(stream_commits=True), Driver()
    for words, tail in UPDATES[:2]:
        streamed.update(words, tail)
        whole.update(words, tail)
        run_streaming(streamed)
        whole.run()
    for words, tail in UPDATES[2:]:
        streamed.update(words, tail, utterance=1)
        whole.update(words, tail, utterance=1)
        run_streaming(streamed)
        whole.run()
    texts = [(t.utterance_id, t.committed_text) for t in whole.translations()]
    assert texts[-1] == (1, "die große Straße ist")
    assert [(t.utterance_id, t.committed_text) for t in streamed.translations()][-1] == texts[-1]
    # Each update's last answer holds what the unstreamed one did, fast path included.
    by_seq_streamed = {t.seq: t.committed_text for t in streamed.translations()}
    assert by_seq_streamed == {t.seq: t.committed_text for t in whole.translations()}


def test_the_result_keeps_what_went_out_when_its_draft_no_longer_starts_with_it() -> None:
    # A repetition loop cut off the end of the draft in the last pass.
    d = Driver(stream_commits=True)
    d.update(*UPDATES[0])
    job = next_job(d)
    full = d.engine.draft(job.request)
    d.session.job_progress(job, prefix(full, 4))
    assert [t.committed_text for t in d.take() if isinstance(t, Translation)] == ["Hallo Welt, wie"]
    d.session.job_done(job, prefix(full, 2))
    (out,) = d.take()
    assert isinstance(out, Translation) and (out.committed_text, out.committed_delta) == (
        "Hallo Welt, wie",
        "",
    )
    # Nothing of that draft is cached: the next update drafts after what went out.
    d.update(["Hello", "world,", "how", "are"], ["you?"])
    job = next_job(d)
    assert job.request.target_prefix == "Hallo Welt, wie"


def test_a_failed_streaming_job_keeps_its_commits_and_the_next_draft_continues_them() -> None:
    d = Driver(stream_commits=True)
    d.update(*UPDATES[0])
    job = next_job(d)
    d.session.job_progress(job, prefix(d.engine.draft(job.request), 3))
    d.session.job_failed(job, EngineFailure("the engine fell over"))
    assert [t.committed_text for t in d.take() if isinstance(t, Translation)] == ["Hallo Welt,"]
    d.update(["Hello", "world,", "how", "are"], ["you?"])
    assert next_job(d).request.target_prefix == "Hallo Welt,"


def test_a_pass_of_a_job_no_longer_in_flight_commits_nothing() -> None:
    d = Driver(stream_commits=True)
    d.update(*UPDATES[0])
    job = next_job(d)
    full = d.engine.draft(job.request)
    d.session.job_done(job, full)
    before = d.take()
    d.session.job_progress(job, prefix(full, 4))
    assert before and d.take() == []


def test_a_final_pass_is_no_streaming_job() -> None:
    """Its words go out with its result. Said while the pass drafted, their clauses' voice took
    the cores the pass needed: FLEURS end lag 0.5-1.7 s later (bench/history/)."""
    d = Driver(stream_commits=True)
    d.update(["Hello", "world,", "how", "are", "you?"], final=True)
    job = next_job(d)
    assert job.kind is JobKind.FINAL and not job.streaming


def test_a_draft_that_repeats_itself_stops_going_out_and_its_result_keeps_what_went_out() -> None:
    d = Driver(stream_commits=True)
    d.update(["Hello", "world,", "how", "are", "you?"], ["greetings"])
    job = next_job(d)
    tokens = d.engine.tokens_of
    loop = tokens("wie", False) + tokens("geht", False) + tokens("es?", False)
    ids = tokens("Hallo", True) + tokens("Welt,", False) + loop * 3
    attention = np.zeros((len(ids), len(job.request.source_words)), np.float32)
    attention[:, 0] = 1.0  # every token on a committed word: only the loop holds it back
    for count in range(1, len(ids)):
        d.session.job_progress(job, MTDraft(ids[:count], attention[:count], finished=False))
    # The second copy is not said in full: once the draft holds two, nothing more goes out.
    streamed = "".join(t.committed_delta for t in d.take() if isinstance(t, Translation))
    assert streamed == "Hallo Welt, wie geht es? wie"
    # The result, its loop cut off after the first copy, no longer starts with what went out.
    d.session.job_done(job, MTDraft(ids[:5], attention[:5], finished=False))
    (out,) = d.take()
    assert isinstance(out, Translation) and out.committed_text == streamed


def test_sessions_on_the_wire_answer_each_update_once() -> None:
    """MT protocol v1 clients read one translation per update: their jobs never stream."""
    d = Driver()
    d.update(*UPDATES[0])
    assert not next_job(d).streaming


# -- the engine's side --------------------------------------------------------------------

HEAD, SOURCE, TAIL = [100, 101], [1, 2, 3], [7, 8]


class ScriptedPass:
    """`draft_loop.DraftPass` whose greedy choices come from a script, every row attending to
    the first source token."""

    def __init__(self, prompt_length: int, script: Sequence[int]) -> None:
        self.cached = 0
        self.guess: list[int] = []
        self.prompt_length = prompt_length
        self.script = list(script)
        self.fed = 0

    def eval(self, feed: Sequence[int], out_from: int) -> tuple[list[int], npt.NDArray[np.float32]]:
        first = self.fed + out_from + 1 - self.prompt_length
        self.fed += len(feed)
        rows = len(feed) - out_from
        choices = [self.script[first + i] for i in range(rows)]
        attention = np.zeros((1, rows, len(SOURCE)), np.float32)
        attention[:, :, 0] = 1.0
        return choices, attention

    def is_stop(self, token: int) -> bool:
        return token == 0

    def drop(self, count: int) -> None:
        self.fed -= count

    def finish(self, target: list[int]) -> dict[str, float]:
        return {}


def test_the_draft_loop_hands_over_the_draft_after_each_pass_but_the_last() -> None:
    ids = HEAD + SOURCE + TAIL
    spans = [(len(HEAD) + i, len(HEAD) + i + 1) for i in range(len(SOURCE))]
    prompt = Prompt(ids, spans, len(HEAD), len(HEAD) + len(SOURCE), len(ids))
    passes: list[MTDraft] = []
    result = draft_loop.run(
        ScriptedPass(len(ids), [40, 41, 42, 0]), prompt, True, 8, started=0.0, on_pass=passes.append
    )
    assert result.token_ids == [40, 41, 42] and result.finished
    assert [p.token_ids for p in passes] == [[40], [40, 41], [40, 41, 42]]
    assert all(not p.finished and p.attention is not None for p in passes)
    assert [p.attention.shape for p in passes if p.attention is not None] == [(1, 3), (2, 3), (3, 3)]


def test_a_wrapped_up_draft_ends_after_the_pass_under_way() -> None:
    ids = HEAD + SOURCE + TAIL
    spans = [(len(HEAD) + i, len(HEAD) + i + 1) for i in range(len(SOURCE))]
    prompt = Prompt(ids, spans, len(HEAD), len(HEAD) + len(SOURCE), len(ids))
    wrap_up = threading.Event()

    def second_pass(draft: MTDraft) -> None:
        if len(draft.token_ids) == 2:
            wrap_up.set()  # set while the engine drafts: the session got the final

    script = [40, 41, 42, 43, 0]
    result = draft_loop.run(
        ScriptedPass(len(ids), script), prompt, True, 8, started=0.0, on_pass=second_pass, wrap_up=wrap_up
    )
    assert result.token_ids == [40, 41, 42] and not result.finished
    assert result.attention is not None and result.attention.shape == (3, 3)
    # Unset, the same draft runs to its end.
    whole = draft_loop.run(
        ScriptedPass(len(ids), script), prompt, True, 8, started=0.0, wrap_up=threading.Event()
    )
    assert whole.token_ids == [40, 41, 42, 43] and whole.finished


def test_a_final_wraps_up_the_partial_draft_in_flight_and_nothing_else() -> None:
    d = Driver(stream_commits=True)
    d.update(*UPDATES[0])
    partial = next_job(d)
    d.update(*UPDATES[1])  # a newer partial: the draft in flight still commits against its words
    assert not partial.request.wrap_up.is_set()
    d.update(["Hello", "world,", "how", "are", "you?"], final=True)
    assert partial.request.wrap_up.is_set() and d.session.stats["wrapped_up"] == 1
    d.update(["the", "big", "street", "is", "red."], final=True, utterance=1)  # the next segment's
    assert d.session.stats["wrapped_up"] == 1, "one draft wrapped up once"
    # The short draft is answered as any other, then the final drafts to the end.
    d.session.job_done(partial, prefix(d.engine.draft(partial.request), 3))
    final = next_job(d)
    assert final.kind is JobKind.FINAL and not final.request.wrap_up.is_set()
    d.session.job_done(final, d.engine.draft(final.request))
    assert [t.committed_text for t in d.take() if isinstance(t, Translation)][
        -1
    ] == "Hallo Welt, wie geht es?"
