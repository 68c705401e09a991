"""The server-VAD turn segmenter, driven by deterministic speech scorers on synthetic audio.

Every tone that should open a turn lasts at least GATE_WINDOWS: shorter speech opens none
(`min_speech_ms`, tested below).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dragoman.streaming.turns import (
    ServerVADConfig,
    SpeechStarted,
    SpeechStopped,
    TurnAudio,
    TurnOp,
    TurnSegmenter,
)

RATE = 16000
W = 512  # window samples
PAD = 300 * RATE // 1000  # default prefix padding in samples
SILENCE_WINDOWS = -(-500 * RATE // 1000 // W)  # windows for the default 500 ms: 16
GATE_WINDOWS = 384 * RATE // 1000 // W  # windows of speech for the default min_speech_ms: 12


class EnergyVAD:
    """Speech wherever a window's RMS is above a level: a stand-in for Silero on tones."""

    window_samples = W

    def __init__(self) -> None:
        self.calls = 0
        self.resets = 0

    def __call__(self, window: np.ndarray) -> float:
        assert window.shape == (W,) and window.dtype == np.float32
        self.calls += 1
        return 0.9 if float(np.sqrt(np.mean(window**2))) > 0.02 else 0.02

    def reset(self) -> None:
        self.resets += 1


class ScriptedVAD:
    """Returns the given probabilities, one per window, then `rest`."""

    window_samples = W

    def __init__(self, probs: Sequence[float], rest: float = 0.0) -> None:
        self.probs = list(probs)
        self.rest = rest
        self.calls = 0

    def __call__(self, window: np.ndarray) -> float:
        self.calls += 1
        return self.probs[self.calls - 1] if self.calls <= len(self.probs) else self.rest

    def reset(self) -> None:
        pass


def tone(samples: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / RATE
    return (0.4 * np.sin(2 * np.pi * 300 * t) + 0.05 * rng.standard_normal(samples)).astype(np.float32)


def silence(samples: int, seed: int = 1) -> np.ndarray:
    # Quiet noise rather than zeros, so conservation checks see real values.
    return (0.001 * np.random.default_rng(seed).standard_normal(samples)).astype(np.float32)


def signal(*parts: tuple[str, int]) -> np.ndarray:
    """Concatenate ("tone" | "silence", windows) parts."""
    pieces = [(tone if kind == "tone" else silence)(n * W, seed=i) for i, (kind, n) in enumerate(parts)]
    return np.concatenate(pieces)


def run(audio: np.ndarray, sizes: Sequence[int] | None = None, **config: int | float) -> list[TurnOp]:
    segmenter = TurnSegmenter(ServerVADConfig(**config), EnergyVAD())  # type: ignore[arg-type]
    if sizes is None:
        return segmenter.push(audio)
    ops: list[TurnOp] = []
    for piece in np.split(audio, np.cumsum(sizes)[:-1]):
        ops.extend(segmenter.push(piece))
    return ops


def normalize(ops: list[TurnOp]) -> list[tuple[str, object]]:
    """Ops with consecutive TurnAudio merged: how a push's chunking shows is not significant."""
    out: list[tuple[str, object]] = []
    for op in ops:
        if isinstance(op, TurnAudio):
            if out and out[-1][0] == "audio":
                out[-1] = ("audio", np.concatenate([out[-1][1], op.samples]))
            else:
                out.append(("audio", op.samples))
        elif isinstance(op, SpeechStarted):
            out.append(("start", op.audio_start_ms))
        elif isinstance(op, SpeechStopped):
            out.append(("stop", op.audio_end_ms))
        # EndLikely and Resumed (server_vad's early start) say nothing of where turns are.
    return out


def turns(ops: list[TurnOp]) -> list[tuple[int, int, np.ndarray]]:
    """(audio_start_ms, audio_end_ms, audio) per complete turn; checks the op grammar."""
    norm = normalize(ops)
    result = []
    assert len(norm) % 3 == 0, [kind for kind, _ in norm]
    for i in range(0, len(norm), 3):
        (k1, start), (k2, audio), (k3, end) = norm[i : i + 3]
        assert (k1, k2, k3) == ("start", "audio", "stop")
        result.append((start, end, audio))
    return result  # type: ignore[return-value]


def ms(sample: int) -> int:
    return sample * 1000 // RATE


def test_one_turn_with_padding_and_trailing_silence() -> None:
    audio = signal(("silence", 40), ("tone", 30), ("silence", 40))
    [(start, end, turn_audio)] = turns(run(audio))
    first = 40 * W - PAD  # padding before the first speech window
    last = 70 * W + SILENCE_WINDOWS * W  # the window that completes 500 ms of silence
    assert (start, end) == (980, 2752) == (ms(first), ms(last))
    np.testing.assert_array_equal(turn_audio, audio[first:last])


def test_padding_is_clamped_at_the_start_of_the_stream() -> None:
    audio = signal(("silence", 3), ("tone", 15), ("silence", 30))
    [(start, end, turn_audio)] = turns(run(audio))
    assert start == 0
    assert end == ms((18 + SILENCE_WINDOWS) * W)
    np.testing.assert_array_equal(turn_audio, audio[: (18 + SILENCE_WINDOWS) * W])


def test_speech_from_the_first_sample_and_no_padding() -> None:
    audio = signal(("tone", 15), ("silence", 30))
    [(start, _, turn_audio)] = turns(run(audio, prefix_padding_ms=0))
    assert start == 0
    assert len(turn_audio) == (15 + SILENCE_WINDOWS) * W


def test_a_pause_shorter_than_silence_duration_keeps_the_turn() -> None:
    short = SILENCE_WINDOWS - 1
    # The second tone, inside the turn, needs no gate: 4 windows keep the turn going.
    audio = signal(("silence", 20), ("tone", 15), ("silence", short), ("tone", 4), ("silence", 40))
    [(start, end, turn_audio)] = turns(run(audio))
    assert start == ms(20 * W - PAD)
    assert end == ms((39 + short + SILENCE_WINDOWS) * W)
    np.testing.assert_array_equal(turn_audio, audio[20 * W - PAD : (39 + short + SILENCE_WINDOWS) * W])


def test_silence_duration_is_configurable() -> None:
    audio = signal(("silence", 20), ("tone", 15), ("silence", 8), ("tone", 15), ("silence", 40))
    assert len(turns(run(audio))) == 1  # 8 windows = 256 ms < 500 ms
    two = turns(run(audio, silence_duration_ms=200))  # 7 windows = 224 ms >= 200 ms
    assert len(two) == 2
    assert two[0][1] == ms((35 + 7) * W)
    # The second turn's padding reaches back only to the first turn's stop.
    assert two[1][0] == ms((35 + 7) * W)
    np.testing.assert_array_equal(two[1][2][:W], audio[42 * W : 43 * W])
    # 256 ms is exactly 8 windows: a silence as long as silence_duration_ms ends the turn.
    exact = turns(run(audio, silence_duration_ms=256))
    assert [end for _, end, _ in exact] == [ms(43 * W), ms(66 * W)]


def test_several_turns_partition_the_audio_they_cover() -> None:
    layout = [("silence", 25), ("tone", 12), ("silence", 50), ("tone", 13), ("silence", 20), ("tone", 30)]
    audio = np.concatenate([signal(*layout), silence(40 * W, seed=9)])
    found = turns(run(audio))
    assert len(found) == 3
    # Speech runs over windows [25, 37), [87, 100) and [120, 150). The last gap (20 windows)
    # leaves only 4 windows between the second turn's stop and the third turn's speech, so the
    # third turn's padding is cut short there instead of reaching into the second turn.
    firsts = [25 * W - PAD, 87 * W - PAD, (100 + SILENCE_WINDOWS) * W]
    lasts = [(37 + SILENCE_WINDOWS) * W, (100 + SILENCE_WINDOWS) * W, (150 + SILENCE_WINDOWS) * W]
    for (start, end, turn_audio), first, last in zip(found, firsts, lasts, strict=True):
        assert (start, end) == (ms(first), ms(last))
        np.testing.assert_array_equal(turn_audio, audio[first:last])
    assert found[2][0] == found[1][1]


@pytest.mark.parametrize("seed", range(6))
def test_push_sizes_do_not_change_the_ops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    audio = signal(("silence", 7), ("tone", 20), ("silence", 30), ("tone", 14), ("silence", 25))
    audio = np.concatenate([audio, tone(15 * W + 333, seed=5)])  # ends mid-window, inside a turn
    reference = normalize(run(audio))
    sizes = rng.integers(0, 1500, size=len(audio) // 300 + 10)
    sizes = sizes[np.cumsum(sizes) < len(audio)]
    sizes = np.append(sizes, len(audio) - sizes.sum())
    chunked = normalize(run(audio, sizes=sizes.tolist()))
    assert [k for k, _ in chunked] == [k for k, _ in reference] == [
        "start", "audio", "stop", "start", "audio", "stop", "start", "audio",
    ]  # fmt: skip
    for (_, a), (_, b) in zip(chunked, reference, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


def test_unaligned_audio_is_conserved() -> None:
    rng = np.random.default_rng(11)
    lengths = [
        int(rng.integers(100, 30000)) if k % 2 == 0 else int(rng.integers(7000, 20000)) for k in range(9)
    ]
    parts = [silence(n, seed=k) if k % 2 == 0 else tone(n, seed=k) for k, n in enumerate(lengths)]
    audio = np.concatenate(parts)
    sizes = rng.integers(1, 4000, size=400)
    sizes = np.append(sizes[np.cumsum(sizes) < len(audio)], 0)
    sizes[-1] = len(audio) - sizes.sum()
    found = turns(run(audio, sizes=sizes.tolist()))
    assert len(found) == 4
    previous_end = 0
    for start, end, turn_audio in found:
        # Locate the turn: it starts at a sample within audio_start_ms and ends at audio_end_ms.
        offsets = [
            s
            for s in range(start * 16, start * 16 + 16)
            if np.array_equal(audio[s : s + len(turn_audio)], turn_audio)
        ]
        assert len(offsets) == 1
        assert ms(offsets[0] + len(turn_audio)) == end
        assert offsets[0] >= previous_end
        previous_end = offsets[0] + len(turn_audio)


def test_hysteresis_between_the_thresholds() -> None:
    def stops(probs: list[float]) -> list[TurnOp]:
        segmenter = TurnSegmenter(ServerVADConfig(), ScriptedVAD(probs, rest=0.4))
        return [
            op for op in segmenter.push(np.zeros(200 * W, dtype=np.float32)) if not isinstance(op, TurnAudio)
        ]

    speech = [0.9] * GATE_WINDOWS
    # Wavering between 0.35 and 0.5 never starts a silence: the turn does not end.
    assert stops(speech) == [SpeechStarted(0)]
    # Once a silence has begun (< 0.35), in-between windows do not break it.
    assert stops([*speech, 0.2]) == [SpeechStarted(0), SpeechStopped(ms((12 + SILENCE_WINDOWS) * W))]
    # A window at or above the threshold does, and the silence starts again later.
    assert stops([*speech, *[0.2] * 10, 0.5, 0.1]) == [
        SpeechStarted(0),
        SpeechStopped(ms((23 + SILENCE_WINDOWS) * W)),
    ]


def test_threshold_is_configurable() -> None:
    audio = np.zeros(60 * W, dtype=np.float32)
    probs = [0.1] * 10 + [0.65] * 15 + [0.1] * 40
    loud = TurnSegmenter(ServerVADConfig(threshold=0.7), ScriptedVAD(probs)).push(audio)
    assert loud == []
    quiet = TurnSegmenter(ServerVADConfig(threshold=0.6), ScriptedVAD(probs)).push(audio)
    assert [type(op) for op in quiet] == [SpeechStarted, TurnAudio, SpeechStopped]


def test_reset_mid_turn_drops_the_turn_and_keeps_the_timeline() -> None:
    vad = EnergyVAD()
    segmenter = TurnSegmenter(ServerVADConfig(), vad)
    audio = signal(("silence", 20), ("tone", 40), ("silence", 40))
    cut = 35 * W + 100
    head = segmenter.push(audio[:cut])
    assert [type(op) for op in head] == [SpeechStarted, TurnAudio]
    assert segmenter.in_speech
    segmenter.reset()
    assert not segmenter.in_speech and not segmenter.holding and vad.resets == 1
    assert segmenter.position == cut
    # The tone goes on: a new turn starts where the audio resumes, with no padding from before.
    tail = turns(segmenter.push(audio[cut:]))
    [(start, end, turn_audio)] = tail
    assert start == ms(cut)
    assert end == ms(cut + (25 + SILENCE_WINDOWS) * W)
    np.testing.assert_array_equal(turn_audio, audio[cut : cut + len(turn_audio)])


def test_offset_puts_ops_on_the_session_timeline() -> None:
    audio = signal(("silence", 20), ("tone", 15), ("silence", 20))
    plain = turns(run(audio))
    segmenter = TurnSegmenter(ServerVADConfig(), EnergyVAD(), offset_samples=RATE * 7)
    shifted = turns(segmenter.push(audio))
    assert [(s - 7000, e - 7000) for s, e, _ in shifted] == [(s, e) for s, e, _ in plain]
    assert segmenter.position == RATE * 7 + len(audio)


def test_silence_only_gives_nothing_and_ops_are_fresh_arrays() -> None:
    assert run(silence(100 * W)) == []
    audio = signal(("tone", 15), ("silence", 20))
    ops = run(audio)
    turn_audio = next(op for op in ops if isinstance(op, TurnAudio))
    audio[:] = 0.0
    assert np.abs(turn_audio.samples).max() > 0.1


@pytest.mark.parametrize(
    "bad",
    [
        {"threshold": 1.5},
        {"threshold": -0.1},
        {"prefix_padding_ms": -1},
        {"silence_duration_ms": -5},
        {"min_speech_ms": -1},
    ],
)
def test_config_rejects_values_out_of_range(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ServerVADConfig(**bad)  # type: ignore[arg-type]


# -- the speech-duration gate (min_speech_ms) --------------------------------------------


def test_speech_shorter_than_min_speech_ms_opens_no_turn() -> None:
    short = signal(("silence", 20), ("tone", GATE_WINDOWS - 1), ("silence", 40))
    assert run(short) == []
    assert run(short, min_speech_ms=0) != []  # the gate off: server_vad's every-window start
    exact = signal(("silence", 20), ("tone", GATE_WINDOWS), ("silence", 40))
    [(start, end, turn_audio)] = turns(run(exact))
    assert (start, end) == (ms(20 * W - PAD), ms((20 + GATE_WINDOWS + SILENCE_WINDOWS) * W))
    np.testing.assert_array_equal(turn_audio, exact[20 * W - PAD : (32 + SILENCE_WINDOWS) * W])


def test_the_gate_delays_speech_started_but_loses_no_audio() -> None:
    audio = signal(("silence", 20), ("tone", 30), ("silence", 40))
    segmenter = TurnSegmenter(ServerVADConfig(), EnergyVAD())
    # 11 windows of speech: held, nothing said yet.
    assert segmenter.push(audio[: 31 * W]) == []
    assert segmenter.holding and not segmenter.in_speech
    # The 12th: SpeechStarted, dated at the first speech window less the padding, and all the
    # audio since then.
    ops = segmenter.push(audio[31 * W : 32 * W])
    assert [type(op) for op in ops] == [SpeechStarted, TurnAudio]
    assert ops[0] == SpeechStarted(ms(20 * W - PAD))
    np.testing.assert_array_equal(ops[1].samples, audio[20 * W - PAD : 32 * W])  # type: ignore[union-attr]


def test_short_gaps_do_not_restart_the_count() -> None:
    # Two bursts of 8 windows, 5 quiet windows apart: 16 windows of speech before any quiet
    # long enough to end a turn (500 ms): one turn from the first burst.
    audio = signal(("silence", 20), ("tone", 8), ("silence", 5), ("tone", 8), ("silence", 40))
    [(start, end, _)] = turns(run(audio))
    assert (start, end) == (ms(20 * W - PAD), ms((41 + SILENCE_WINDOWS) * W))
    # Apart by 500 ms or more, each burst is dropped on its own.
    apart = signal(("silence", 20), ("tone", 8), ("silence", SILENCE_WINDOWS), ("tone", 8), ("silence", 40))
    assert run(apart) == []


def test_a_dropped_candidate_can_be_the_next_turns_padding() -> None:
    # A 5-window click, then (after 20 quiet windows) a turn whose 1 s padding reaches back over it.
    audio = signal(("silence", 20), ("tone", 5), ("silence", 20), ("tone", 20), ("silence", 40))
    pad = RATE  # 1000 ms
    [(start, _, turn_audio)] = turns(run(audio, prefix_padding_ms=1000))
    assert start == ms(45 * W - pad)
    np.testing.assert_array_equal(turn_audio[: pad + W], audio[45 * W - pad : 46 * W])


def test_a_short_word_set_off_by_a_pause_begins_the_turn_after_it() -> None:
    """ "However, | due to ...": a word of 8 windows (half the gate or more), a pause that drops
    it (18 windows), then speech within as much quiet again: the turn begins before the word."""
    audio = signal(("silence", 20), ("tone", 8), ("silence", 18), ("tone", 20), ("silence", 40))
    [(start, end, turn_audio)] = turns(run(audio))
    assert start == ms(20 * W - PAD)
    assert end == ms((66 + SILENCE_WINDOWS) * W)
    np.testing.assert_array_equal(turn_audio, audio[20 * W - PAD : (66 + SILENCE_WINDOWS) * W])


def test_a_dropped_word_is_forgotten_after_as_much_quiet_again() -> None:
    audio = signal(
        ("silence", 20), ("tone", 8), ("silence", 2 * SILENCE_WINDOWS + 2), ("tone", 20), ("silence", 40)
    )
    speech = (28 + 2 * SILENCE_WINDOWS + 2) * W
    [(start, _, _)] = turns(run(audio))
    assert start == ms(speech - PAD)


def test_a_recalled_word_does_not_count_toward_the_gate() -> None:
    """The word and the speech after it are each short of the gate: still no turn."""
    short = GATE_WINDOWS - 1
    audio = signal(("silence", 20), ("tone", 8), ("silence", 18), ("tone", short), ("silence", 40))
    assert run(audio) == []
    assert run(audio, sizes=[W * 7] * (len(audio) // (W * 7)) + [len(audio) % (W * 7)]) == []


def test_open_candidate_announces_a_held_turn_for_a_commit() -> None:
    audio = signal(("silence", 20), ("tone", 5))
    segmenter = TurnSegmenter(ServerVADConfig(), EnergyVAD())
    assert segmenter.push(audio) == [] and segmenter.holding
    ops = segmenter.open_candidate()
    assert [type(op) for op in ops] == [SpeechStarted, TurnAudio] and segmenter.in_speech
    np.testing.assert_array_equal(ops[1].samples, audio[20 * W - PAD :])  # type: ignore[union-attr]
    assert segmenter.open_candidate() == []  # nothing held any more
