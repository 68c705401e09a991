"""semantic_vad in the turn segmenter, with a scripted turn model; and properties of both modes
over random streams (contiguous turns, nothing lost, push sizes irrelevant)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dragoman.streaming.turns import (
    PAUSE_MS,
    Paused,
    Resumed,
    SemanticVADConfig,
    ServerVADConfig,
    SpeechStopped,
    TurnAudio,
    TurnConfig,
    TurnOp,
    TurnSegmenter,
)
from tests.unit.test_turns import GATE_WINDOWS, PAD, RATE, EnergyVAD, W, ms, normalize, signal, turns

PAUSE_WINDOWS = -(-PAUSE_MS * RATE // 1000 // W)  # 7 windows: 224 ms >= 200 ms


class ScriptedTurnModel:
    """Answers the given P(complete), one per call, then `rest`; keeps what it was shown."""

    def __init__(self, probs: Sequence[float] = (), rest: float = 0.0) -> None:
        self.probs = list(probs)
        self.rest = rest
        self.seen: list[np.ndarray] = []

    def __call__(self, audio: np.ndarray) -> float:
        assert audio.ndim == 1 and audio.dtype == np.float32
        self.seen.append(audio.copy())
        return self.probs.pop(0) if self.probs else self.rest


def semantic(
    audio: np.ndarray, model: ScriptedTurnModel, sizes: Sequence[int] | None = None, **config: object
) -> list[TurnOp]:
    segmenter = TurnSegmenter(SemanticVADConfig(**config), EnergyVAD(), turn_model=model)  # type: ignore[arg-type]
    if sizes is None:
        return segmenter.push(audio)
    return [op for piece in np.split(audio, np.cumsum(sizes)[:-1]) for op in segmenter.push(piece)]


def windows_for(milliseconds: int) -> int:
    return -(-milliseconds * RATE // 1000 // W)


def test_a_complete_turn_ends_at_the_pause() -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 200))
    model = ScriptedTurnModel([0.9])
    [(start, end, turn_audio)] = turns(semantic(audio, model))
    assert (start, end) == (ms(20 * W - PAD), ms((50 + PAUSE_WINDOWS) * W))
    # Asked once, on the whole turn so far: padding, speech and the pause's silence.
    [seen] = model.seen
    np.testing.assert_array_equal(seen, turn_audio)


def test_low_eagerness_judges_only_a_longer_pause() -> None:
    # A 300 ms pause, then more speech: low (400 ms) never asks there; medium asks and ends.
    audio = signal(("silence", 20), ("tone", 30), ("silence", 10), ("tone", 20), ("silence", 200))
    low = ScriptedTurnModel(rest=0.9)
    [(_, end, _)] = turns(semantic(audio, low, eagerness="low"))
    assert end == ms((80 + windows_for(400)) * W) and len(low.seen) == 1
    assert len(turns(semantic(audio, ScriptedTurnModel(rest=0.9)))) == 2


@pytest.mark.parametrize(
    ("eagerness", "longest"), [("auto", 4000), ("medium", 4000), ("high", 2000), ("low", 8000)]
)
def test_an_incomplete_turn_waits_the_eagerness_max_timeout(eagerness: str, longest: int) -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 300))
    model = ScriptedTurnModel([0.0])
    [(_, end, _)] = turns(semantic(audio, model, eagerness=eagerness))
    assert end == ms((50 + windows_for(longest)) * W)
    assert len(model.seen) == 1, "one call per pause"


def test_the_timeout_shrinks_as_the_probability_nears_the_threshold() -> None:
    config = SemanticVADConfig()
    assert config.wait_ms(0.0) == 4000 and config.wait_ms(0.5) == PAUSE_MS == config.wait_ms(0.99)
    assert config.wait_ms(0.25) == 2100  # halfway: 200 + 3800 / 2
    audio = signal(("silence", 20), ("tone", 30), ("silence", 200))
    [(_, end, _)] = turns(semantic(audio, ScriptedTurnModel([0.25])))
    assert end == ms((50 + windows_for(2100)) * W)
    # high eagerness ends at P = 0.3, which medium still doubts.
    assert turns(semantic(audio, ScriptedTurnModel([0.3]), eagerness="high"))[0][1] == ms(57 * W)
    assert turns(semantic(audio, ScriptedTurnModel([0.3])))[0][1] > ms(57 * W)


def test_speech_in_the_wait_continues_the_same_turn() -> None:
    # A pause judged incomplete, 1 s of silence, then 10 more windows of speech (>= 192 ms):
    # one turn with both parts, judged again at its second pause.
    layout = [("silence", 20), ("tone", 30), ("silence", 31), ("tone", 10), ("silence", 200)]
    audio = signal(*layout)
    model = ScriptedTurnModel([0.05, 0.95])
    [(start, end, turn_audio)] = turns(semantic(audio, model))
    assert (start, end) == (ms(20 * W - PAD), ms((91 + PAUSE_WINDOWS) * W))
    np.testing.assert_array_equal(turn_audio, audio[20 * W - PAD : (91 + PAUSE_WINDOWS) * W])
    assert [len(seen) for seen in model.seen] == [30 * W + PAD + PAUSE_WINDOWS * W, len(turn_audio)]


def test_speech_shorter_than_the_continuation_gate_does_not_reset_the_wait() -> None:
    # 4 windows (128 ms < 192 ms) of speech 1 s into the wait: the timeout still runs from the
    # first pause, and the blip is part of the turn's audio.
    audio = signal(("silence", 20), ("tone", 30), ("silence", 31), ("tone", 4), ("silence", 200))
    model = ScriptedTurnModel([0.0])
    [(_, end, turn_audio)] = turns(semantic(audio, model))
    assert end == ms((50 + windows_for(4000)) * W)
    np.testing.assert_array_equal(turn_audio, audio[20 * W - PAD : (50 + windows_for(4000)) * W])
    # With the continuation gate at 128 ms, the same blip continues the turn.
    gated = turns(semantic(audio, ScriptedTurnModel([0.0, 0.9]), min_speech_continuation_ms=128))
    assert [end for _, end, _ in gated] == [ms((85 + PAUSE_WINDOWS) * W)]


def test_a_new_turn_after_a_stop_needs_the_full_gate() -> None:
    # The first turn ends at its pause (complete); 10 windows of speech right after are a new
    # turn's candidate, which needs min_speech_ms (12 windows), not the continuation gate.
    audio = signal(("silence", 20), ("tone", 30), ("silence", 10), ("tone", 10), ("silence", 200))
    ops = semantic(audio, ScriptedTurnModel([0.9], rest=0.9))
    assert len(turns(ops)) == 1
    longer = signal(("silence", 20), ("tone", 30), ("silence", 10), ("tone", GATE_WINDOWS), ("silence", 200))
    assert len(turns(semantic(longer, ScriptedTurnModel([0.9], rest=0.9)))) == 2


def test_the_model_sees_the_last_eight_seconds() -> None:
    audio = signal(("silence", 10), ("tone", 300), ("silence", 100))  # 9.6 s of speech
    model = ScriptedTurnModel([0.9])
    [(_, _, turn_audio)] = turns(semantic(audio, model))
    [seen] = model.seen
    assert len(seen) == 8 * RATE
    np.testing.assert_array_equal(seen, turn_audio[-8 * RATE :])


def test_a_candidate_is_dropped_after_a_pause_of_quiet() -> None:
    # In semantic_vad a candidate ends where a turn would first be judged: after PAUSE_MS.
    bursts = signal(("silence", 20), ("tone", 8), ("silence", PAUSE_WINDOWS), ("tone", 8), ("silence", 40))
    assert semantic(bursts, ScriptedTurnModel()) == []
    close = signal(
        ("silence", 20), ("tone", 8), ("silence", PAUSE_WINDOWS - 1), ("tone", 8), ("silence", 200)
    )
    assert len(turns(semantic(close, ScriptedTurnModel([0.9])))) == 1


def test_semantic_vad_needs_a_turn_model_and_checks_eagerness() -> None:
    with pytest.raises(ValueError, match="turn model"):
        TurnSegmenter(SemanticVADConfig(), EnergyVAD())
    with pytest.raises(ValueError, match="eagerness"):
        SemanticVADConfig(eagerness="eager")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SemanticVADConfig(min_speech_continuation_ms=-1)


# -- properties over random streams ---------------------------------------------------


def random_stream(rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Alternating quiet and tone of random lengths (not whole windows); and each tone's span."""
    parts, spans, at = [], [], 0
    for k in range(int(rng.integers(4, 12))):
        n = int(rng.integers(200, 60 * W))
        piece = (
            (0.4 * np.sin(np.arange(n) * 0.12)).astype(np.float32)
            if k % 2
            else (0.001 * rng.standard_normal(n)).astype(np.float32)
        )
        parts.append(piece)
        if k % 2:
            spans.append((at, at + n))
        at += n
    return np.concatenate(parts), spans


def content_model(audio: np.ndarray) -> float:
    """A deterministic turn model of the audio alone: as if complete for some lengths only."""
    return 0.9 if (len(audio) // W) % 3 == 0 else 0.1


@pytest.mark.parametrize("seed", range(40))
def test_turns_are_contiguous_ordered_and_keep_every_long_speech_run(seed: int) -> None:
    rng = np.random.default_rng(seed)
    audio, spans = random_stream(rng)
    configs: list[TurnConfig] = [
        ServerVADConfig(silence_duration_ms=int(rng.integers(0, 800))),
        SemanticVADConfig(eagerness=("low", "medium", "high", "auto")[seed % 4]),
    ]
    for config in configs:

        def segment(sizes: Sequence[int] | None, config: TurnConfig = config) -> list[TurnOp]:
            segmenter = TurnSegmenter(config, EnergyVAD(), turn_model=content_model)
            pieces = [audio] if sizes is None else np.split(audio, np.cumsum(sizes)[:-1])
            ops = [op for piece in pieces for op in segmenter.push(piece)]
            if segmenter.in_speech:  # close the last turn so that every turn is whole
                ops.append(SpeechStopped(segmenter.ms(segmenter.position - len(audio) % W)))
            return ops

        ops = segment(None)
        found = turns(ops)
        previous_end = 0
        for start, end, turn_audio in found:
            # Window-aligned, so each turn is exactly the audio between its two times.
            assert start * RATE % 1000 == 0 and start >= previous_end
            np.testing.assert_array_equal(turn_audio, audio[start * RATE // 1000 : end * RATE // 1000])
            previous_end = end
        # Nothing lost: every whole window of a tone at least as long as the gate is in a turn.
        bounds = [(start * RATE // 1000, end * RATE // 1000) for start, end, _ in found]
        for first, last in spans:
            inside = range(-(-first // W) * W, min(last, len(audio)) - W + 1, W)
            if len(inside) >= GATE_WINDOWS:
                for begin in inside:
                    assert any(s <= begin and begin + W <= e for s, e in bounds), (begin, bounds)
        # How the stream is cut into pushes changes nothing.
        sizes = rng.integers(1, 3000, size=len(audio) // 500 + 10)
        sizes = np.append(sizes[np.cumsum(sizes) < len(audio)], 0)
        sizes[-1] = len(audio) - sizes.sum()
        chunked = normalize(segment(sizes.tolist()))
        reference = normalize(ops)
        assert [k for k, _ in chunked] == [k for k, _ in reference]
        for (_, a), (_, b) in zip(chunked, reference, strict=True):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
            else:
                assert a == b


# -- pauses (the early start), in both modes ---------------------------------------------------


def paused(audio: np.ndarray, model: ScriptedTurnModel | None = None) -> list[TurnOp]:
    segmenter = TurnSegmenter(ServerVADConfig(), EnergyVAD(), turn_model=model, pauses=True)
    return segmenter.push(audio)


def test_server_vad_with_pauses_says_so_the_moment_a_silence_begins() -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 40))
    ops = paused(audio)
    kinds = [type(op).__name__ for op in ops if not isinstance(op, TurnAudio)]
    assert kinds == ["SpeechStarted", "Paused", "SpeechStopped"]
    pause = next(op for op in ops if isinstance(op, Paused))
    stopped = next(op for op in ops if isinstance(op, SpeechStopped))
    assert pause.audio_end_ms == ms(51 * W), "at the first silent window, not after 200 ms"
    assert stopped.audio_end_ms > pause.audio_end_ms, "the silence still ends the turn"
    # All the speech, and the first silent window, went out before the pause.
    before = ops[: ops.index(pause)]
    assert sum(len(op.samples) for op in before if isinstance(op, TurnAudio)) == 51 * W - (20 * W - PAD)
    # The turn itself is where server_vad alone puts it.
    plain = TurnSegmenter(ServerVADConfig(), EnergyVAD()).push(audio)
    assert [(s, e) for s, e, _ in turns(ops)] == [(s, e) for s, e, _ in turns(plain)]


def test_speech_after_a_pause_resumes_the_turn_and_server_vad_asks_no_turn_model() -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 10), ("tone", 20), ("silence", 40))
    model = ScriptedTurnModel([0.9])
    kinds = [type(op).__name__ for op in paused(audio, model) if not isinstance(op, TurnAudio)]
    assert kinds == ["SpeechStarted", "Paused", "Resumed", "Paused", "SpeechStopped"]
    assert model.seen == [], "server_vad's pauses are the VAD's alone"
    plain = TurnSegmenter(ServerVADConfig(), EnergyVAD()).push(audio)
    assert not [op for op in plain if isinstance(op, Paused | Resumed)], "off by default"


def semantic_paused(audio: np.ndarray, model: ScriptedTurnModel) -> list[TurnOp]:
    segmenter = TurnSegmenter(SemanticVADConfig(), EnergyVAD(), turn_model=model, pauses=True)
    return segmenter.push(audio)


def kinds_of(ops: list[TurnOp]) -> list[str]:
    return [type(op).__name__ for op in ops if not isinstance(op, TurnAudio)]


def test_semantic_vad_with_pauses_says_so_before_the_turn_model_judges() -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 40))
    ops = semantic_paused(audio, ScriptedTurnModel([0.9]))
    assert kinds_of(ops) == ["SpeechStarted", "Paused", "SpeechStopped"]
    pause = next(op for op in ops if isinstance(op, Paused))
    stopped = next(op for op in ops if isinstance(op, SpeechStopped))
    assert pause.audio_end_ms == ms(51 * W), "at the first silent window, not at the 200 ms pause"
    assert stopped.audio_end_ms == ms((50 + PAUSE_WINDOWS) * W), "the turn model still ends the turn"
    # The turns themselves are where semantic_vad alone puts them.
    plain = semantic(audio, ScriptedTurnModel([0.9]))
    assert [(b, e) for b, e, _ in turns(ops)] == [(b, e) for b, e, _ in turns(plain)]


def test_speech_that_resumes_a_soft_ended_turn_says_so_and_the_next_silence_pauses_again() -> None:
    # P 0.0 soft-ends the turn at the pause; 20 windows (640 ms) of speech resume it; P 0.9 ends it.
    audio = signal(("silence", 20), ("tone", 30), ("silence", 12), ("tone", 20), ("silence", 40))
    ops = semantic_paused(audio, ScriptedTurnModel([0.0, 0.9]))
    assert kinds_of(ops) == ["SpeechStarted", "Paused", "Resumed", "Paused", "SpeechStopped"]
    resumed = ops.index(next(op for op in ops if isinstance(op, Resumed)))
    before = sum(len(op.samples) for op in ops[:resumed] if isinstance(op, TurnAudio))
    # Said with the first window of speech (its audio just before), not after the 192 ms gate.
    assert before == (63 * W) - (20 * W - PAD)
    assert len(turns(ops)) == 1


def test_speech_too_short_to_resume_a_turn_still_ends_its_pause() -> None:
    # 3 windows (96 ms) of speech in the soft-ended wait: under the 192 ms gate, the turn does
    # not resume and ends at its timeout; the pause's transcript no longer holds all of it.
    audio = signal(("silence", 20), ("tone", 30), ("silence", 12), ("tone", 3), ("silence", 200))
    ops = semantic_paused(audio, ScriptedTurnModel([0.0]))
    assert kinds_of(ops) == ["SpeechStarted", "Paused", "Resumed", "SpeechStopped"]
    plain = semantic(audio, ScriptedTurnModel([0.0]))
    assert [(b, e) for b, e, _ in turns(ops)] == [(b, e) for b, e, _ in turns(plain)]
