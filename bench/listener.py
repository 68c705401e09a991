"""The project's own Whisper as the benchmarks' listener: it transcribes speech the server made
(a voice's round trip, the interpreter's spoken output) so that the speech can be scored as text.

One engine call per piece of at most `MAX_SECONDS` (Whisper's window is 30 s); longer speech is cut
at its quietest 20 ms within the last `SEARCH_SECONDS` before each limit, a pause between words
rather than the middle of one. Mandarin comes back in traditional or simplified characters as
Whisper pleases and is converted to simplified (zhconv), so that scores count words, not script.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soxr
import zhconv

from dragoman.config import ASRSettings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.registry import create_asr_engine

RATE = 16_000
MAX_SECONDS = 28.0
SEARCH_SECONDS = 8.0
FRAME = RATE // 50


def load_listener(model: str, cache_dir: Path) -> ASREngine:
    """The ASR engine `model` (e.g. "whisper-base"), loaded and warmed up."""
    asr = create_asr_engine(ASRSettings(model=model), cache_dir)
    asr.warm_up()
    return asr


def pieces(audio: np.ndarray) -> list[np.ndarray]:
    """`audio` (16 kHz) in pieces of at most `MAX_SECONDS`, each cut at a quiet frame."""
    limit, search = int(MAX_SECONDS * RATE), int(SEARCH_SECONDS * RATE)
    out = []
    while len(audio) > limit:
        frames = audio[limit - search : limit].reshape(-1, FRAME)
        cut = limit - search + FRAME * int(np.argmin(np.square(frames).mean(axis=1)))
        out.append(audio[:cut])
        audio = audio[cut:]
    return [*out, audio]


def transcribe(asr: ASREngine, pcm16: bytes, language: str, rate: int = RATE) -> str:
    """What `asr` hears in little-endian PCM16 at `rate` Hz, the language fixed to `language`."""
    audio = (np.frombuffer(pcm16, dtype="<i2") / np.float32(32768)).astype(np.float32)
    if rate != RATE:
        audio = np.ascontiguousarray(soxr.resample(audio, rate, RATE), dtype=np.float32)
    if not audio.size:
        return ""
    texts = []
    for result in asr.transcribe_batch([StepRequest(p, language=language) for p in pieces(audio)]):
        if not isinstance(result, StepResult):
            raise result
        texts.append(result.text.strip())
    text = ("" if language in ("zh", "ja") else " ").join(t for t in texts if t)
    return zhconv.convert(text, "zh-cn") if language == "zh" else text
