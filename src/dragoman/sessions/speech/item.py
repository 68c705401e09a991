"""One conversation item of a transcription session: its audio and its hypothesis.

A long item is decoded in windows (`dragoman.streaming.sealing`): the text before the
current window is sealed, final, and the window's hypothesis (`raw`) follows it. The
client sees one transcript, `sealed + raw`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from dragoman.engines.asr.base import FloatAudio, TextTokenizer
from dragoman.streaming.deltas import DeltaLedger
from dragoman.streaming.sealing import Seal

#: Tokens of sealed text passed as the decoder's previous-text prompt: context for the
#: next window (16 measured worse on long items: WER 11.0 % against 9.3 % with 48).
#: Steps whose prompts differ in length decode in separate engine calls, so there is no
#: prompt until PROMPT_MIN_TOKENS are sealed, and the engine rounds a longer one down to a
#: whole number of its grain (16): long items' steps share three lengths at most.
PROMPT_TOKENS = 48
PROMPT_MIN_TOKENS = 16


def new_item_id() -> str:
    """OpenAI-style conversation item ids: the session names its items, the protocol only quotes them."""
    return "item_" + uuid.uuid4().hex[:20]


@dataclass(eq=False)
class Item:
    previous_item_id: str | None
    item_id: str = field(default_factory=new_item_id)
    #: 16 kHz audio heard so far, in pieces (joined on demand).
    pieces: list[FloatAudio] = field(default_factory=list)
    samples: int = 0
    #: Input-rate samples appended (without VAD), for the cap and the clock.
    input_samples: int = 0
    #: 16 kHz samples the item holds on the client's timeline, counting what the
    #: resampler still holds back for its lookahead, so that a chunk of 24 kHz input
    #: is due on the append that completes it.
    clock: int = 0
    #: `clock` at the last step: audio past it is pending.
    decoded_clock: int = 0
    #: Samples of audio the last step decoded.
    decoded_samples: int = 0
    #: Text sealed as final (`raw` of earlier windows, leading spaces kept), and where the
    #: current window starts in the item's audio.
    sealed: str = ""
    window_start: int = 0
    #: Windows sealed so far.
    seals: int = 0
    #: Steps run so far (the re-decode algorithm's chunk_id).
    steps: int = 0
    #: The raw hypothesis of the current window's last step, exactly as the engine returned it.
    raw: str = ""
    #: `raw` minus its last unfixed_tokens tokens: the next step's forced prefix.
    raw_prefix: str = ""
    #: Whether `raw_prefix` was firmed up early, by two steps agreeing (`SessionConfig.agree_early`).
    agreed: bool = False
    #: The language the engine used (detected when the session leaves it open).
    language: str | None = None
    #: Whether `language` was detected on enough speech to keep: later steps don't detect it
    #: again (`ItemDecoder`, LANGUAGE_SETTLES_SECONDS and LANGUAGE_SURE_SECONDS).
    language_settled: bool = False
    ledger: DeltaLedger = field(default_factory=DeltaLedger)
    #: Where the turn began on the session timeline (server VAD).
    start_ms: int = 0
    closed: bool = False
    #: Cleared by the client: any result still in flight for it is discarded.
    dropped: bool = False
    #: A silence began in the open turn (early start): decode it now, whole.
    provisional: bool = False
    #: A `Provisional` transcript of this turn went out, and no `TurnResumed` since.
    speculated: bool = False
    #: Times speech came back after a silence began in the turn.
    resumes: int = 0
    #: `resumes` at the early start's last whole decode at a pause (None before one). While it
    #: equals `resumes`, no speech came back after that decode, only the closing silence:
    #: the last step's transcript is the turn's.
    paused_at: int | None = None

    def decoded_whole(self) -> bool:
        """Whether the last step heard all the item's speech: all its audio, or everything
        but a closing silence in which no speech came back (a pause's whole decode)."""
        if self.steps == 0:
            return False
        return self.decoded_samples == self.samples or self.paused_at == self.resumes

    def add(self, audio: FloatAudio) -> None:
        if len(audio):
            self.pieces.append(audio)
            self.samples += len(audio)

    def audio(self) -> FloatAudio:
        if len(self.pieces) > 1:
            self.pieces = [np.concatenate(self.pieces)]
        return self.pieces[0] if self.pieces else np.zeros(0, dtype=np.float32)

    def window_audio(self) -> FloatAudio:
        """The audio of the current window: all of it after the last seal."""
        return self.audio()[self.window_start :]

    def transcript(self) -> str:
        """The whole hypothesis: what was sealed, then the window's."""
        return (self.sealed + self.raw).strip()

    def firm(self, forced: bool) -> str:
        """What is final or will be forced: the sealed text, then (`forced`) the stable prefix."""
        return (self.sealed + (self.raw_prefix if forced else "")).lstrip()

    def prompt(self, tokenizer: TextTokenizer, user_prompt: str | None) -> str | None:
        """The decoder's previous text: the user's prompt, then the end of the sealed text."""
        ids = tokenizer.encode(self.sealed) if self.sealed.strip() else []
        if len(ids) < PROMPT_MIN_TOKENS:
            return user_prompt
        tail = tokenizer.decode(ids[-PROMPT_TOKENS:]).strip()
        # A cut inside a multi-byte character decodes to U+FFFD: drop the broken head.
        tail = tail.lstrip("\ufffd").strip()
        return f"{user_prompt.strip()} {tail}" if user_prompt and user_prompt.strip() else tail

    def seal(self, seal: Seal) -> None:
        """Make the head of the window's hypothesis final; the next window starts at the cut.

        `seal.chars` lies inside `raw_prefix`, so the rest of the stable prefix stays forced
        in the next window, and nothing that was firm changes.
        """
        assert seal.chars <= len(self.raw_prefix)
        self.sealed += self.raw[: seal.chars]
        self.raw = self.raw[seal.chars :]
        self.raw_prefix = self.raw_prefix[seal.chars :]
        self.window_start += seal.samples
        self.seals += 1
