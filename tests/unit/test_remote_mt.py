"""The remote MT backend's own logic: its prompt, and the LocalAgreement commit that replaces
AlignAtt for an engine without attention (the e2e test runs a real llama_cpp.server)."""

from __future__ import annotations

import pytest

from dragoman.config import load_settings
from dragoman.engines.asr.word_agreement import WordTokenizer
from dragoman.engines.mt.base import DraftMode, MTDraft, MTRequest
from dragoman.engines.mt.chat_translation import BACKEND, ChatTranslation, messages
from dragoman.engines.registry import create_mt_engine
from dragoman.sessions.mt.utterance import Utterance, commit_agreed
from dragoman.streaming.local_agreement import agreed_words


def test_words_agree_up_to_the_first_difference() -> None:
    assert agreed_words([], ["Guten", " Morgen"]) == 0
    assert agreed_words(["Guten", " Morgen", " allerseits"], ["Guten", " Morgen,", " alle"]) == 2
    assert agreed_words(["Guten", " Morgen"], ["Guten", " Morgen", " zusammen"]) == 2
    assert agreed_words([" —"], [" —"]) == 1, "punctuation alone compares as it is"
    assert agreed_words([" —"], [" !"]) == 0


def test_a_word_is_committed_once_two_drafts_agree_on_it() -> None:
    tokenizer = WordTokenizer()
    utt = Utterance(id=0)

    def step(continuation: str) -> tuple[str, str]:
        draft = MTDraft(tokenizer.encode(continuation), None, finished=False, retranslation=True)
        cut = commit_agreed(draft, utt, tokenizer.decode)
        utt.committed = cut.committed
        assert cut.reason == "local_agreement"
        return cut.committed, cut.buffer

    assert step("Guten Morgen") == ("", "Guten Morgen")
    assert step("Guten Morgen, alle") == ("Guten Morgen,", "alle")
    # The next draft continues the accepted target (the engine aligned it): only its rest.
    assert step(" alle zusammen") == ("Guten Morgen, alle", "zusammen")
    assert step(" miteinander") == ("Guten Morgen, alle", "miteinander"), "a changed word waits"


def test_the_prompt_asks_for_the_translation_alone() -> None:
    request = MTRequest(
        "en",
        "de",
        ["Good", "morning,"],
        context_text="A talk on birds.",
        history=[("Hello.", "Hallo.")],
        force_target_language=True,
    )
    chat = messages(request)
    system = chat[0]["content"]
    assert "English into German" in system and "mid-sentence" in system and "Write only in German" in system
    assert "A talk on birds." in system
    assert chat[1:] == [
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hallo."},
        {"role": "user", "content": "Good morning,"},
    ]
    final = messages(MTRequest("zh", "en", ["你", "好"], mode=DraftMode.FINAL))
    assert "mid-sentence" not in final[0]["content"] and final[-1]["content"] == "你好"


def test_a_base_url_chooses_the_remote_backend(tmp_path: object) -> None:
    settings = load_settings(None, **{"mt.base_url": "http://127.0.0.1:9/v1", "mt.directions": ["en-de"]}).mt
    engine = create_mt_engine(settings, tmp_path)  # type: ignore[arg-type]
    try:
        assert isinstance(engine, ChatTranslation) and engine.directions() == ["en-de"]
        assert not engine.capabilities.attention
        assert engine.describe().backend == BACKEND
    finally:
        engine.close()
    every = ChatTranslation(load_settings(None, **{"mt.base_url": "http://127.0.0.1:9/v1"}).mt)
    assert "en-de" in every.directions() and "zh-en" in every.directions()


def test_the_remote_backend_needs_a_url() -> None:
    with pytest.raises(ValueError):
        ChatTranslation(load_settings().mt)
