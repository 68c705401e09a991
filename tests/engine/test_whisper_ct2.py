"""The CTranslate2 Whisper backend with the packaged models on real speech from ../shared/eval."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from dragoman.config import ASRSettings
from dragoman.engines.asr.base import StepRequest, StepResult
from dragoman.engines.asr.chinese_script import write
from dragoman.engines.asr.whisper_ct2 import WhisperCT2Engine
from dragoman.engines.asr.whisper_tokenizer import WhisperTokenizer
from dragoman.engines.registry import create_asr_engine
from dragoman.errors import ClientError, RequestRejected
from dragoman.tools.eval_set import asr_rows, eval_dir
from dragoman.tools.wer import wer

pytestmark = pytest.mark.engine

EVAL = eval_dir()
RATE = 16_000
EN = (
    "asr/en/en_ls-testclean_1995-1837-0001.wav",
    "asr/en/en_ls-devclean_2412-153948-0000.flac",
    "asr/en/en_fleurs_test_001.ogg",
    "asr/en/en_jfk_inaugural_1961.flac",
)
DE = "asr/de/de_fleurs_test_004.ogg"

REFS = {row["file"]: row["reference_text"] for row in asr_rows() if not row["channel"]}


def audio(name: str) -> np.ndarray:
    data, rate = sf.read(EVAL / name, dtype="float32", always_2d=True)
    mono = data[:, 0]
    return np.asarray(soxr.resample(mono, rate, RATE) if rate != RATE else mono, dtype=np.float32)


def ok(result: StepResult | ClientError) -> StepResult:
    assert isinstance(result, StepResult), result
    return result


@pytest.fixture(scope="module")
def base(cache_dir: Path) -> WhisperCT2Engine:
    engine = create_asr_engine(ASRSettings(model="whisper-base"), cache_dir)
    assert isinstance(engine, WhisperCT2Engine)
    return engine


@pytest.fixture(scope="module")
def tiny(cache_dir: Path) -> WhisperCT2Engine:
    engine = create_asr_engine(ASRSettings(model="whisper-tiny.en"), cache_dir)
    assert isinstance(engine, WhisperCT2Engine)
    return engine


def test_capabilities(base: WhisperCT2Engine, tiny: WhisperCT2Engine) -> None:
    assert {"en", "de", "it", "zh", "fr"} <= base.capabilities.languages
    assert len(base.capabilities.languages) == 99
    assert tiny.capabilities.languages == {"en"}
    assert base.capabilities.max_audio_seconds == 30.0
    ids = base.tokenizer.encode(" Die Höhle")
    assert ids and base.tokenizer.decode(ids) == " Die Höhle"


@pytest.mark.parametrize("model", ["base", "tiny"])
def test_english_wer(model: str, request: pytest.FixtureRequest) -> None:
    engine: WhisperCT2Engine = request.getfixturevalue(model)
    results = engine.transcribe_batch([StepRequest(audio(name), language="en") for name in EN])
    texts = [ok(r).text for r in results]
    assert wer([REFS[name] for name in EN], texts) < 0.08, texts
    assert all(t.startswith(" ") for t in texts)  # Whisper's leading space is kept


def test_language_is_detected(base: WhisperCT2Engine) -> None:
    [de, en] = base.transcribe_batch([StepRequest(audio(DE)), StepRequest(audio(EN[0]))])
    assert ok(de).language == "de" and ok(en).language == "en"
    assert wer([REFS[DE]], [ok(de).text], "de") < 0.25, ok(de).text
    # Whole clips: Whisper is sure of both; a language that was named is not scored.
    assert all((ok(r).language_probability or 0.0) > 0.8 for r in (de, en))
    [named] = base.transcribe_batch([StepRequest(audio(EN[0]), language="en")])
    assert ok(named).language_probability is None


def test_detection_among_candidates_reports_the_candidates_probability(base: WhisperCT2Engine) -> None:
    """A candidate that is not Whisper's first guess comes with its own, lower probability."""
    [first] = base.transcribe_batch([StepRequest(audio(DE), detect_among=("de", "en"))])
    [forced] = base.transcribe_batch([StepRequest(audio(DE), detect_among=("en",))])
    assert ok(first).language == "de" and ok(forced).language == "en"
    assert (ok(forced).language_probability or 1.0) < (ok(first).language_probability or 0.0)


def test_forced_prefix_is_honoured(base: WhisperCT2Engine) -> None:
    # Lower case with no punctuation, as the references are written: Whisper would start
    # with a capital ("It was…", "All nouns, …"), so only forcing puts these words first.
    for name in (EN[0], EN[2]):
        prefix = " " + " ".join(REFS[name].lower().split()[:4])
        text = ok(base.transcribe_batch([StepRequest(audio(name), prefix=prefix, language="en")])[0]).text
        assert text.startswith(prefix), text
        assert len(text) > len(prefix) + 20  # and it goes on transcribing
        assert wer([REFS[name]], [text]) < 0.15, text


def test_whole_hypothesis_as_prefix_adds_nothing(base: WhisperCT2Engine) -> None:
    clip = audio(EN[3])
    first = ok(base.transcribe_batch([StepRequest(clip, language="en")])[0]).text
    again = ok(base.transcribe_batch([StepRequest(clip, prefix=first, language="en")])[0]).text
    assert again == first


def test_prefix_keeps_multibyte_text(base: WhisperCT2Engine) -> None:
    prefix = " Die Höhle befindet sich"
    result = ok(base.transcribe_batch([StepRequest(audio(DE), prefix=prefix, language="de")])[0])
    assert result.text.startswith(prefix) and "isoliert" in result.text  # and it goes on to the end
    # "Mekka" or "Mecker" depends on the window's padding (30 s of it says "Mecker").
    assert wer([REFS[DE]], [result.text], "de") < 0.3, result.text


def test_batch_matches_one_at_a_time(base: WhisperCT2Engine) -> None:
    requests = [
        StepRequest(audio(EN[0]), language="en"),
        StepRequest(audio(EN[2]), prompt="Grammar lesson: German nouns."),
        StepRequest(audio(DE)[: 8 * RATE]),
    ]
    together = [ok(r) for r in base.transcribe_batch(requests)]
    alone = [ok(base.transcribe_batch([r])[0]) for r in requests]
    assert together == alone
    assert [r.language for r in together] == ["en", "en", "de"]


def test_encoder_calls_split_on_a_cpu_change_nothing(base: WhisperCT2Engine) -> None:
    # Four 12 s windows are more than one CPU encoder call takes (`_CPU_ENCODE_SECONDS`),
    # so each is encoded alone; the decoder still runs them as one batch.
    names = (EN[1], EN[3], "asr/en/en_fleurs_test_000.ogg", "asr/de/de_fleurs_test_001.ogg")
    clips = [audio(name)[: 10 * RATE] for name in names]
    assert all(len(clip) == 10 * RATE for clip in clips)
    requests = [StepRequest(clip, word_times=True) for clip in clips]
    assert base.split_encode
    split = [ok(r) for r in base.transcribe_batch(requests)]
    base.split_encode = False
    try:
        whole = [ok(r) for r in base.transcribe_batch(requests)]
    finally:
        base.split_encode = True
    assert split == whole
    assert [r.language for r in split] == ["en", "en", "en", "de"] and all(r.words for r in split)


def test_calls_at_once_match_calls_in_turn(cache_dir: Path) -> None:
    # The server's default on a CPU: as many calls at once as the engine has threads.
    engine = create_asr_engine(ASRSettings(model="whisper-tiny.en", threads=2), cache_dir)
    assert engine.capabilities.parallel_calls == 2
    names = (EN[0], EN[1], EN[2], "asr/en/en_fleurs_test_000.ogg")
    batches = [[StepRequest(audio(name), language="en", word_times=True)] for name in names]
    in_turn = [engine.transcribe_batch(batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=2) as pool:
        at_once = list(pool.map(engine.transcribe_batch, batches))
    assert at_once == in_turn
    assert wer([REFS[EN[0]]], [ok(in_turn[0][0]).text]) < 0.15


def test_unsupported_language_is_rejected_in_its_slot(base: WhisperCT2Engine, tiny: WhisperCT2Engine) -> None:
    clip = audio(EN[0])
    good, bad = base.transcribe_batch([StepRequest(clip, language="en"), StepRequest(clip, language="xx")])
    assert isinstance(bad, RequestRejected) and "'xx'" in bad.message
    assert wer([REFS[EN[0]]], [ok(good).text]) < 0.1
    bad, good = tiny.transcribe_batch([StepRequest(clip, language="de"), StepRequest(clip)])
    assert isinstance(bad, RequestRejected) and "English" in bad.message
    assert ok(good).language == "en" and wer([REFS[EN[0]]], [ok(good).text]) < 0.15


def test_audio_over_30s_is_rejected(base: WhisperCT2Engine) -> None:
    [result] = base.transcribe_batch([StepRequest(np.zeros(31 * RATE, np.float32))])
    assert isinstance(result, RequestRejected) and "30 s" in result.message


def test_trimmed_encoding_matches_padded(base: WhisperCT2Engine) -> None:
    # 7.3 s cut mid-sentence, like a re-decode step, and a whole 11.7 s utterance.
    requests = [
        StepRequest(audio(EN[1])[: int(7.3 * RATE)], language="en"),
        StepRequest(audio(EN[1]), language="en"),
    ]
    trimmed = [ok(r).text for r in base.transcribe_batch(requests)]
    base.trim = False
    try:
        padded = [ok(r).text for r in base.transcribe_batch(requests)]
    finally:
        base.trim = True
    assert wer(padded, trimmed) == 0.0, (padded, trimmed)


@pytest.mark.parametrize("model", ["base", "tiny"])
def test_tokenizer_round_trips_what_the_model_says(model: str, request: pytest.FixtureRequest) -> None:
    """Re-encoding a hypothesis gives the model's own tokens, so a forced prefix is one it could say.

    The packaged whisper-base tokenizer.json lacks GPT-2's first merge ("Ġ t"); unrepaired,
    " the" encodes as "Ġ" + "the" and a prefix cut after the lone "Ġ" made the decoder loop.
    """
    engine: WhisperCT2Engine = request.getfixturevalue(model)
    tok = engine.tokenizer
    assert isinstance(tok, WhisperTokenizer)
    assert [tok.id_to_token(i) for i in tok.encode(" the table")] == ["Ġthe", "Ġtable"]
    text = ok(engine.transcribe_batch([StepRequest(audio(EN[0]), language="en")])[0]).text
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.encode(tok.decode(ids)) == ids
    assert all(tok.id_to_token(i) != "Ġ" for i in ids)


def test_users_own_weights_folder(tmp_path: Path, cache_dir: Path) -> None:
    """Any CTranslate2 Whisper folder on disk serves, named after the folder."""
    from dragoman.weights import resolve

    packaged = resolve("whisper-tiny.en", cache_dir)
    own = tmp_path / "my-whisper"
    own.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        (own / name).symlink_to(packaged / name)
    engine = create_asr_engine(ASRSettings(model=str(own)), cache_dir)
    assert engine.name == "my-whisper"
    text = ok(engine.transcribe_batch([StepRequest(audio(EN[0]), language="en")])[0]).text
    assert wer([REFS[EN[0]]], [text]) <= 0.15, text


SHORT_CUTS = (0.7, 1.3, 2.5, 4.0, 6.3)
LOOPY = (
    "asr/en/en_jfk_inaugural_1961.flac",
    "asr/en/en_fleurs_test_001.ogg",
    "asr/en/en_earnings22_4483589_261_321.wav",
    "asr/en/en_ls-devclean_2412-153948-0000.flac",
)


def test_short_trimmed_windows_do_not_loop(base: WhisperCT2Engine) -> None:
    """Steps cut at 0.7-6.3 s, each encoded over its own length (no 10 s floor).

    Without the loop guard, 5 of these 20 decodes started over ("And so my fellow
    Americans. And so my fellow Americans. And so…") until the length limit.
    """
    from dragoman.engines.repetition import loop_start

    requests = [
        StepRequest(audio(name)[: int(cut * RATE)], language="en") for name in LOOPY for cut in SHORT_CUTS
    ]
    assert base._window([base._prepare(0, requests[0])], trimmed=True) == 2 * RATE  # 0.7 s + 1 s of tail
    trimmed = [ok(r).text for r in base.transcribe_batch(requests)]
    for request, text in zip(requests, trimmed, strict=True):
        ids = base.tokenizer.encode(text)
        seconds = len(request.audio) / RATE
        # No loop the engine's guard would cut mid-decode, and none that ran to the limit. A short
        # echo that Whisper ends by itself may remain: on an AVX2-only EPYC the 0.7 s cut of a
        # FLEURS clip gives " In addition, in addition, in addition," (three copies, then the end).
        assert loop_start(ids) is None, text
        assert len(ids) <= 6 * seconds + 8, text  # speech, not a loop that ran to the limit
    base.trim = False
    try:
        padded = [ok(r).text for r in base.transcribe_batch(requests)]
    finally:
        base.trim = True
    # The same words as over the padded 30 s window, give or take a word at the cut.
    assert wer(padded, trimmed) < 0.2, list(zip(padded, trimmed, strict=True))


def test_word_starts_put_a_seal_in_a_pause(base: WhisperCT2Engine) -> None:
    """Cross-attention word starts (CTranslate2 `align`) and the audio find a pause to seal at."""
    from dragoman.streaming.sealing import SealPolicy, choose_seal

    clip = audio("asr/en/en_jfk_inaugural_1961.flac")[: 12 * RATE]
    [plain, timed] = base.transcribe_batch(
        [StepRequest(clip, language="en"), StepRequest(clip, language="en", word_times=True)]
    )
    assert ok(plain).words == ()  # only asked for
    result = ok(timed)
    assert result.text == ok(plain).text
    words = result.words
    assert len(words) == len(result.text.split())
    assert all(result.text[w.chars] == " " for w in words)
    times = [w.seconds for w in words]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 12
    seal = choose_seal(result.text, len(result.text), words, clip, RATE, SealPolicy.for_window(10.0))
    assert seal is not None, (result.text, words)
    sealed = result.text[: seal.chars]
    assert sealed.strip() and result.text.startswith(sealed), sealed
    around = clip[seal.samples - RATE // 20 : seal.samples + RATE // 20]
    assert np.sqrt(np.mean(around**2)) < 0.1 * np.sqrt(np.mean(clip**2)), sealed


def test_mandarin_is_written_in_the_configured_script(base: WhisperCT2Engine, cache_dir: Path) -> None:
    # Whisper writes Mandarin in either script as it happens (mostly traditional on these
    # clips, 40 % CER as written): simplified by default, as the references are.
    rows = [row for row in asr_rows("zh") if not row["channel"]]
    requests = [StepRequest(audio(row["file"]), language="zh") for row in rows]
    simplified = [ok(r).text for r in base.transcribe_batch(requests)]
    assert all(write(text, "zh", "simplified") == text for text in simplified), simplified
    cer = wer([row["reference_text"] for row in rows], simplified, "zh")
    assert cer < 0.33, (cer, simplified)
    traditional_engine = create_asr_engine(
        ASRSettings(model="whisper-base", chinese_script="traditional"), cache_dir
    )
    traditional = [ok(r).text for r in traditional_engine.transcribe_batch(requests)]
    assert all(write(text, "zh", "traditional") == text for text in traditional), traditional
    assert traditional != simplified
