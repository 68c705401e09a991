"""The Moonshine (onnxruntime) backend with the packaged base-en model on real speech from ../shared/eval."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dragoman.config import ASRSettings
from dragoman.engines.asr.base import PrefixMode, StepRequest
from dragoman.engines.asr.moonshine_ort import MoonshineEngine
from dragoman.engines.asr.moonshine_tokenizer import MoonshineTokenizer
from dragoman.engines.registry import create_asr_engine
from dragoman.errors import RequestRejected
from dragoman.tools.wer import wer
from dragoman.weights import resolve
from tests.engine.test_whisper_ct2 import EN, REFS, audio, ok

pytestmark = pytest.mark.engine

RATE = 16_000


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> MoonshineEngine:
    # The backend alone picks its packaged model when the settings name none.
    built = create_asr_engine(ASRSettings(backend="moonshine", threads=2), cache_dir)
    assert isinstance(built, MoonshineEngine)
    return built


def test_packaged_model_resolves_and_the_avx512_library_is_not_loaded(
    engine: MoonshineEngine, cache_dir: Path
) -> None:
    folder = resolve("moonshine-base-en", cache_dir, role="asr")
    assert {p.name for p in folder.iterdir()} >= {
        "encoder_model.ort",
        "decoder_model_merged.ort",
        "tokenizer.bin",
    }
    assert engine.name == "moonshine-base-en"
    assert engine.describe().backend == "moonshine-ort"
    # moonshine_cpp's __init__ loads libmoonshine.so (AVX-512 only): it must never be imported.
    assert "moonshine_cpp" not in sys.modules


def test_capabilities(engine: MoonshineEngine) -> None:
    caps = engine.capabilities
    assert caps.languages == {"en"}
    assert caps.prefix_mode is PrefixMode.DECODER_PROMPT
    assert caps.max_audio_seconds == 30.0


def test_tokenizer_round_trips_and_uses_llama_pieces(engine: MoonshineEngine) -> None:
    tok = engine.tokenizer
    assert isinstance(tok, MoonshineTokenizer)
    for text in (" And so, my fellow Americans", "naïve café", " 東京 1961", " two  spaces"):
        assert tok.decode(tok.encode(text)) == text
    # SentencePiece BPE gives whole words their single pieces, not characters.
    assert len(tok.encode(" the country")) == 2


def test_offline_wer_on_english_recordings(engine: MoonshineEngine) -> None:
    results = engine.transcribe_batch([StepRequest(audio(name), language="en") for name in EN])
    texts = [ok(r).text for r in results]
    assert all(texts), texts
    score = wer([REFS[name] for name in EN], texts)
    # Whisper base scores about 0.05 on these four; Moonshine base-en about 0.02.
    assert score < 0.12, (score, texts)


def test_forced_prefix_is_honoured(engine: MoonshineEngine) -> None:
    jfk = audio("asr/en/en_jfk_inaugural_1961.flac")
    for prefix in (" And so my fellow Americans, ask not", "And so my fellow citizens"):
        result = ok(engine.transcribe_batch([StepRequest(jfk, prefix=prefix, language="en")])[0])
        assert result.text.startswith(prefix)
        assert "your country" in result.text[len(prefix) :]


def test_batch_equals_single(engine: MoonshineEngine) -> None:
    a, b = audio(EN[0]), audio(EN[3])
    requests = [
        StepRequest(a, language="en"),
        StepRequest(b[: 4 * RATE], prefix=" And so", language="en"),
        StepRequest(a.copy(), language="en"),  # same shape as the first: one shared pass
        StepRequest(b, language="en"),
    ]
    batched = [ok(r).text for r in engine.transcribe_batch(requests)]
    single = [ok(engine.transcribe_batch([r])[0]).text for r in requests]
    assert batched == single
    assert batched[0] == batched[2]


def test_calls_at_once_match_calls_in_turn(engine: MoonshineEngine) -> None:
    # The fixture's 2 threads run as 2 calls of one thread each.
    assert engine.capabilities.parallel_calls == 2
    batches = [[StepRequest(audio(name), language="en")] for name in EN]
    in_turn = [engine.transcribe_batch(batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=2) as pool:
        at_once = list(pool.map(engine.transcribe_batch, batches))
    assert at_once == in_turn
    assert wer([REFS[EN[0]]], [ok(in_turn[0][0]).text]) < 0.15


def test_silence_gives_no_text(engine: MoonshineEngine) -> None:
    silence = np.zeros(3 * RATE, dtype=np.float32)
    rng = np.random.default_rng(1)
    faint = (rng.standard_normal(3 * RATE) * 1e-3).astype(np.float32)
    for clip in (silence, faint):
        text = ok(engine.transcribe_batch([StepRequest(clip, language="en")])[0]).text
        assert len(text.split()) <= 1, text


def test_cost_follows_the_audio_length(engine: MoonshineEngine) -> None:
    """No fixed window: the encoder's output, and so its work, grows with the audio."""
    speech = audio("asr/en/en_ls-devclean_2412-153948-0000.flac")
    frames = {}
    for seconds in (2, 10):
        before = engine.encoded_frames
        engine.transcribe_batch([StepRequest(speech[: seconds * RATE], language="en")])
        frames[seconds] = engine.encoded_frames - before
    assert 4.5 < frames[10] / frames[2] < 5.5, frames


def test_refusals(engine: MoonshineEngine) -> None:
    clip = audio(EN[0])
    results = engine.transcribe_batch(
        [
            StepRequest(clip, language="de"),
            StepRequest(np.zeros(31 * RATE, dtype=np.float32)),
            StepRequest(clip[: 2 * RATE], language="en"),
        ]
    )
    assert isinstance(results[0], RequestRejected) and results[0].param == "language"
    assert isinstance(results[1], RequestRejected) and results[1].param == "audio"
    assert ok(results[2]).text


def test_warm_up_runs(engine: MoonshineEngine) -> None:
    passes = engine.decoder_passes
    engine.warm_up()
    assert engine.decoder_passes > passes


def test_an_utterance_followed_by_silence_is_not_lost(engine: MoonshineEngine, cache_dir: Path) -> None:
    """espeak-ng's question then 0.6 s of silence decoded to "" before the trailing quiet was cut
    (a voice agent's turn ends after 500 ms of silence: no transcript, no answer)."""
    from dragoman.config import TTSSettings
    from dragoman.engines.tts.speaker import Speaker
    from dragoman.engines.workers import CancelToken

    speaker = Speaker(TTSSettings(), cache_dir)
    pcm = bytearray()
    try:
        question = "At what temperature in Celsius does water boil at sea level?"
        speaker.synthesize("espeak-en", question, 1.0, CancelToken(), pcm.extend, RATE)
    finally:
        speaker.close()
    speech = np.frombuffer(bytes(pcm), dtype=np.int16).astype(np.float32) / 32768
    for silence in (0.6, 1.2):
        audio = np.concatenate([speech, np.zeros(round(silence * RATE), dtype=np.float32)])
        text = ok(engine.transcribe_batch([StepRequest(audio, language="en")])[0]).text
        assert "boil" in text.lower(), (silence, text)


def test_a_step_does_not_read_its_window_again_after_the_prefix(engine: MoonshineEngine) -> None:
    """Forced to a prefix that ends inside a word, on the first 4.6 s of a FLEURS clip (a step
    that came late under load), Moonshine went on past what it heard by reading the window
    again: "antic and fascinating town of sintra and within easy reach is the romantic and
    fascinating town of sintra and within". The echo is cut; what it heard first is kept."""
    from dragoman.audio.files import decode_audio_file
    from dragoman.audio.pcm import float_to_pcm16
    from tests.engine.test_whisper_ct2 import EVAL

    # The exact samples of that step (the failure depends on them): the clip decoded as the
    # server decodes a file, sent as PCM16, from where the VAD began the segment.
    data = (EVAL / "asr/en/en_fleurs_test_002.ogg").read_bytes()
    pcm = float_to_pcm16(decode_audio_file(data, max_seconds=60).samples)
    clip = (np.frombuffer(pcm, dtype=np.int16) / 32768).astype(np.float32)[3_392 : 3_392 + 73_408]
    prefix = " To the north and within easy reach is the rom"
    text = ok(engine.transcribe_batch([StepRequest(clip, prefix=prefix, language="en")])[0]).text
    assert text.startswith(prefix)
    said = text[len(prefix) :].lower()
    assert "fascinating town of sintra" in said, text
    assert "within" not in said and "reach" not in said, text
