"""The remote ASR backend's own logic: the client-side stable prefix, word tokens and timings,
the WAV it sends, and its choice by the settings (no server: the e2e test runs a real one)."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest

from dragoman.config import ASRSettings, load_settings
from dragoman.engines.asr.base import PrefixMode, StepRequest, StepResult, WordStart
from dragoman.engines.asr.openai_transcriptions import (
    BACKEND,
    OpenAITranscriptions,
    _ordered,
    wav_bytes,
    word_times,
)
from dragoman.engines.asr.word_agreement import WordTokenizer, agree, normalized, split_words, with_space
from dragoman.engines.registry import create_asr_engine
from dragoman.streaming.stable_prefix import stable_prefix

JFK = " And so, my fellow Americans, ask not what your country can do for you."


def test_words_join_back_to_the_text() -> None:
    for text in (JFK, "  two  spaces ", "我们今天去北京。", "Hello 世界, ok?", ""):
        assert "".join(split_words(text)) == text
    assert split_words("我们 ok") == ["我", "们", " ok"]
    assert normalized("Americans,") == normalized("americans") == "americans"


def test_the_word_tokenizer_cuts_the_stable_prefix_at_words() -> None:
    tokenizer = WordTokenizer()
    assert stable_prefix(JFK, tokenizer, 3) == " And so, my fellow Americans, ask not what your country can"
    assert tokenizer.decode(tokenizer.encode(JFK)) == JFK
    # One vocabulary for every text: the same word has the same id.
    assert tokenizer.encode(" fellow")[0] == tokenizer.encode(JFK)[3]


def test_a_hypothesis_that_restates_the_prefix_continues_it() -> None:
    result = agree(" And so, my fellow", JFK)
    assert result.text == " And so, my fellow Americans, ask not what your country can do for you."
    assert result.disagreed == 0
    # Every hypothesis word has a place in the text, in order.
    assert [index for _, index in result.words] == list(range(len(split_words(JFK))))


def test_the_prefix_wins_where_the_hypothesis_hears_it_otherwise() -> None:
    # The firm text was already sent: it is kept, and the continuation starts after the
    # words that stand in its place.
    result = agree("And so my fellow", " So, my fellows Americans ask not")
    assert result.text == "And so my fellow Americans ask not"
    assert result.disagreed == 2  # "And" was not heard, "fellow" was heard as "fellows"


def test_a_hypothesis_shorter_than_the_prefix_adds_nothing() -> None:
    assert agree("And so my fellow Americans", " And so my").text == "And so my fellow Americans"
    assert agree("And so", "").text == "And so"


def test_no_prefix_takes_the_hypothesis_as_it_is() -> None:
    result = agree("", JFK)
    assert result.text == JFK and result.disagreed == 0


def test_a_continuation_keeps_the_hypothesis_spaces() -> None:
    assert agree("Hello", "Hello there").text == "Hello there"
    assert agree("Hello,", "hello, there").text == "Hello, there"
    assert agree("我们", "我们今天").text == "我们今天"


def test_word_times_follow_the_servers_words_through_punctuation() -> None:
    hypothesis = " And so, my fellow Americans."
    words = [
        {"word": "And", "start": 0.0, "end": 0.2},
        {"word": "so", "start": 0.3, "end": 0.5},
        {"word": "my", "start": 0.9, "end": 1.0},
        {"word": "fellow", "start": 1.1, "end": 1.4},
        {"word": "Americans", "start": 1.5, "end": 2.2},
    ]
    assert word_times(hypothesis, words) == [0.0, 0.3, 0.9, 1.1, 1.5]
    assert word_times(hypothesis, []) == [None] * 5


def test_word_starts_land_on_the_prefix_words_they_confirm() -> None:
    hypothesis = " and so my fellow Americans ask"
    times = word_times(hypothesis, [{"word": w, "start": float(i)} for i, w in enumerate(hypothesis.split())])
    result = agree("And so, my fellow", hypothesis)
    starts = [(chars, times[index]) for chars, index in result.words]
    assert starts[:2] == [(0, 0.0), (3, 1.0)]
    assert result.text[starts[-1][0] :] == " ask"


def test_word_starts_keep_rising() -> None:
    words = [WordStart(0, 0.0), WordStart(5, 1.0), WordStart(9, 0.5), WordStart(12, 2.0)]
    assert _ordered(iter(words)) == (WordStart(0, 0.0), WordStart(5, 1.0), WordStart(12, 2.0))


def test_a_step_is_sent_as_a_16_bit_wav() -> None:
    audio = np.array([0.0, 0.5, -1.0, 2.0], dtype=np.float32)
    with wave.open(io.BytesIO(wav_bytes(audio))) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16_000, 1, 2)
        samples = np.frombuffer(wav.readframes(4), dtype="<i2")
    assert samples.tolist() == [0, 16383, -32767, 32767]


def test_a_base_url_chooses_the_remote_backend(tmp_path: Path) -> None:
    settings = load_settings(
        None, **{"asr.base_url": "http://user:secret@127.0.0.1:9/v1?x=1", "asr.max_concurrent": 5}
    ).asr
    engine = create_asr_engine(settings, tmp_path)  # nothing is contacted until a step
    try:
        assert isinstance(engine, OpenAITranscriptions)
        assert engine.capabilities.parallel_calls == 5
        assert engine.capabilities.prefix_mode == PrefixMode.CLIENT_AGREEMENT
        info = engine.describe()
        assert info.backend == BACKEND and info.device == "remote"
        assert "secret" not in info.name and info.name == "whisper-1@http://127.0.0.1:9/v1"
        # Every step is a call of its own.
        from dragoman.engines.asr.base import StepRequest

        step = StepRequest(np.zeros(10, dtype=np.float32))
        assert engine.batch_key(step) != engine.batch_key(step)
        assert engine._language("english") == "en" and engine._language("de") == "de"
        assert engine._language("") is None
    finally:
        engine.close()


def test_the_remote_backend_needs_a_url() -> None:
    with pytest.raises(ValueError):
        OpenAITranscriptions(load_settings().asr)


def test_a_server_answer_that_is_no_transcript_is_a_server_fault_with_an_error_id() -> None:
    import httpx

    from dragoman.engines.asr.openai_transcriptions import ASRServerError, ASRServerUnavailable
    from dragoman.engines.remote_http import RemoteServer

    server = RemoteServer(
        "ASR",
        "http://user:secret@127.0.0.1:9/v1",
        api_key="k",
        timeout_s=1.0,
        connect_retries=0,
        unavailable=ASRServerUnavailable,
        error=ASRServerError,
    )
    try:
        with pytest.raises(ASRServerError) as refused:
            server.json_of(httpx.Response(503, text="overloaded"))
        assert refused.value.error_id.startswith("err_") and "HTTP 503: overloaded" in refused.value.message
        assert "secret" not in refused.value.message
        with pytest.raises(ASRServerError, match="no JSON"):
            server.json_of(httpx.Response(200, text="<html>"))
        assert server.json_of(httpx.Response(200, json={"text": "hi"})) == {"text": "hi"}
        assert server.fault("a text").code == "asr_server_error"
    finally:
        server.close()


def test_a_long_prompt_is_cut_to_its_end_at_a_space() -> None:
    from dragoman.engines.asr.openai_transcriptions import PROMPT_CHARS, prompt_tail

    assert prompt_tail("short prompt") == "short prompt"
    long = " ".join(f"word{i}" for i in range(1000))
    tail = prompt_tail(long)
    assert len(tail) <= PROMPT_CHARS and long.endswith(" " + tail) and tail.startswith("word")


#: The steps of a 29 s LibriSpeech clip (1272-128104-0004) through a dragoman node, as the
#: node answered them (its text has no leading space), and the words each step's window was
#: sealed after (None: not sealed), captured from the e2e run that lost "a jingo poem".
LONG_CLIP_STEPS: tuple[tuple[str, str | None], ...] = (
    ("Lennel's pictures are", None),
    ("Linels pictures are a sort of up guards and Adam", None),
    ("Linille's pictures are a sort of up guards and atom paintings and mason's", None),
    (
        "Linnell's pictures are a sort of upgards and atom paintings, and Mason's exquisite Ittles' eras.",
        " up guards",
    ),
    (
        "Guards and Adam paintings, and Mason's exquisite ittles are as national as a jingo poem.",
        " paintings,",
    ),
    ("and Mason's exquisite ittles are as national as a Jingle poem. Mr. Burke.", " are as"),
    # The window starts at "national", and the node leaves out its first words.
    ("a jingo poem. Mr.", None),
    ("national as a jingo poem. Mr. Birk Foster's landscapes smile at one much in the same way that", None),
    (
        "national as a jingo poem. Mr. Birk Foster's landscapes smile at one much in the same way that"
        " Mr. Carker is to flashes",
        " smile",
    ),
    ("at one much in the same way that Mr. Carker used to flash his teeth.", None),
    (
        "at one much in the same way that Mr. Carker used to flash his teeth. And Mr. John Collier gives his city",
        None,
    ),
    (
        "at one much in the same way that Mr. Carker used to flash his teeth. And Mr. John Collier gives his"
        " sitter a cheerful slap on the back.",
        " teeth.",
    ),
    ("And Mr. John Collier gives his sitter a cheerful slap in the back before he says like us.", " gives"),
    ("his sitter a cheerful slap in the back before he says like a shampooer in a turkish bath.", None),
)
LONG_CLIP_FINAL = (
    "his sitter a cheerful slap in the back before he says like a shampooer and a turkish bath. Next man."
)


def test_a_long_items_deltas_are_the_head_of_its_transcript_across_windows() -> None:
    """The session's text path (`sessions/speech/decoder.py`: 2 unfixed chunks, 5 unfixed words)
    over the node's real answers: what was firm is sent, windows are sealed where they were, and
    every delta extends the final transcript, with no word the node heard dropped on the way.
    Before: the window after "are as" began "national" glued to it ("asnational"), and the step
    that did not hear "national as" again skipped "a jingo" in its place, so the deltas said
    "as national as Mr. Birk" and the transcript "asnational as a jingo poem. Mr. Birk"."""
    from dragoman.sessions.speech.item import Item
    from dragoman.streaming.sealing import Seal

    tokenizer, item = WordTokenizer(), Item(previous_item_id=None)
    for text, sealed_after in LONG_CLIP_STEPS:
        prefix = item.raw_prefix if item.steps >= 2 else ""
        item.raw = agree(prefix, with_space(text), by_letters=True).text
        item.steps += 1
        item.raw_prefix = stable_prefix(item.raw, tokenizer, 5)
        if sealed_after is not None:
            chars = item.raw.index(sealed_after) + len(sealed_after)
            assert chars <= min(len(prefix), len(item.raw_prefix)), (
                "only text forced and still stable is sealed"
            )
            item.seal(Seal(chars, 0))
        item.ledger.advance(item.firm(forced=item.steps >= 2))
    item.raw = agree(item.raw_prefix, with_space(LONG_CLIP_FINAL), by_letters=True).text
    transcript = item.transcript()
    item.ledger.advance(transcript)
    assert item.ledger.revisions == 0 and item.ledger.sent == transcript, (item.ledger.sent, transcript)
    assert (
        "up guards and atom paintings, and Mason's exquisite ittles are as national as a jingo poem. Mr. Birk"
        in (transcript)
    )
    assert transcript.endswith("like a shampooer and a turkish bath. Next man.")


def test_prefix_words_the_hypothesis_left_out_skip_none_of_its_words() -> None:
    # The window starts at "national", which the server did not hear: "a jingo" is what follows.
    assert (
        agree(" national as", " a jingo poem. Mr.", by_letters=True).text == " national as a jingo poem. Mr."
    )
    # Heard otherwise ("up guards" as "upgards"): the word in their place is skipped, not the next.
    prefix, hypothesis = (
        "Linels pictures are a sort of up guards",
        " Linnell's pictures are a sort of upgards and atom",
    )
    assert agree(prefix, hypothesis, by_letters=True).text == prefix + " and atom"
    assert (
        agree("And so my fellow", " So, my fellows Americans", by_letters=True).text
        == "And so my fellow Americans"
    )
    # A continuation that repeats none of the prefix gets the space the server's text lacks.
    assert agree("Hello", "there", by_letters=True).text == "Hello there"
    assert agree("我们", "今天", by_letters=True).text == "我们今天"
    assert (
        with_space("national as") == " national as" and with_space("我们") == "我们" and with_space("") == ""
    )


def test_a_retranslation_stands_for_unmatched_prefix_words_one_for_one() -> None:
    # MT (`engines/mt/chat_translation.py`): a new draft may say the accepted words otherwise.
    assert agree("Guten Morgen", "Hallo zusammen, wie geht es").text == "Guten Morgen wie geht es"
    assert agree(" national as", " a jingo poem.").text == " national as poem."


@pytest.mark.parametrize(
    ("script", "written"), [("simplified", "该项目于2011年完工"), ("heard", "該項目於2011年完工")]
)
def test_chinese_from_the_server_is_written_in_this_servers_script(
    script: str, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the local Whisper's (`asr.chinese_script`): the prefix sent before agrees with it, and
    # the server's words still time the text's.
    engine = OpenAITranscriptions(
        ASRSettings(base_url="http://127.0.0.1:9/v1", chinese_script=script)  # type: ignore[arg-type]
    )
    heard = "該項目於2011年完工"
    words = [{"word": c, "start": 0.1 * i, "end": 0.1 * i + 0.1} for i, c in enumerate(heard[:4])]
    body = {"text": heard, "language": "chinese", "words": words}
    monkeypatch.setattr(engine, "_post", lambda fields, files: body)
    try:
        step = StepRequest(np.zeros(16_000, np.float32), language="zh", word_times=True)
        result = engine.transcribe(step)
    finally:
        engine.close()
    assert isinstance(result, StepResult)
    assert result.text.strip() == written
    assert [round(w.seconds, 1) for w in result.words] == [0.0, 0.1, 0.2, 0.3]
