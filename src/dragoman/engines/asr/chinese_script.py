"""Chinese transcripts in the script the server is set to write.

Whisper has one language code for written Chinese and was trained on both scripts, so it
writes Mandarin in simplified or traditional characters as it happens, often traditional for
speech from mainland China ("該項目於…開始"): Whisper base's character error rate on the
eval set's five Mandarin clips is 40 % as written and 25 % in simplified characters. Its
authors point to a converter (openai/whisper discussions #987); OpenCC is the standard one,
and its simplified-traditional tables map characters and phrases one to one, so a converted
text keeps its length and the character offsets of its words (`StepResult.words`). A
conversion that would change the length is not made.

The local Whisper (`whisper_ct2`) and a remote server's answers (`openai_transcriptions`,
whatever model wrote them) are both written so. `asr.chinese_script`: "simplified" (the
default: mainland China and Singapore, and what the eval set's Mandarin is), "traditional"
(in Taiwan's standard forms: 才, not OpenCC's general 纔), or "heard": as the model wrote it.
"""

from __future__ import annotations

import functools

import opencc

from dragoman.config import ChineseScript
from dragoman.logs import get_logger

log = get_logger(__name__)

#: OpenCC's configuration that writes each script.
_OPENCC_CONFIG = {"simplified": "t2s", "traditional": "s2tw"}


@functools.cache
def _converter(config: str) -> opencc.OpenCC:
    return opencc.OpenCC(config)


def write(text: str, language: str | None, script: ChineseScript) -> str:
    """`text`, a transcript in `language`, written in `script` when that is Chinese; any
    other transcript, and any with "heard", as it is."""
    config = _OPENCC_CONFIG.get(script)
    if language != "zh" or config is None or not text:
        return text
    converted: str = _converter(config).convert(text)
    if len(converted) != len(text):
        log.debug("a Chinese script conversion changed the length; the text is kept", script=script)
        return text
    return converted
