"""One conversation item of a transcription session: its audio and its hypothesis."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from dragoman.engines.asr.base import FloatAudio
from dragoman.streaming.deltas import DeltaLedger


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
    #: Steps run so far (the re-decode algorithm's chunk_id).
    steps: int = 0
    #: The raw hypothesis of the last step, exactly as the engine returned it.
    raw: str = ""
    #: `raw` minus its last unfixed_tokens tokens: the next step's forced prefix.
    raw_prefix: str = ""
    #: The language the engine used, kept so that later steps don't detect it again.
    language: str | None = None
    ledger: DeltaLedger = field(default_factory=DeltaLedger)
    #: Where the turn began on the session timeline (server VAD).
    start_ms: int = 0
    closed: bool = False
    #: Cleared by the client: any result still in flight for it is discarded.
    dropped: bool = False
    #: The turn model judged the open turn complete (early start): decode it now, whole.
    provisional: bool = False
    #: A `Provisional` transcript of this turn went out, and no `TurnResumed` since.
    speculated: bool = False
    #: Times speech came back after the turn model judged the turn complete.
    resumes: int = 0

    def add(self, audio: FloatAudio) -> None:
        if len(audio):
            self.pieces.append(audio)
            self.samples += len(audio)

    def audio(self) -> FloatAudio:
        if len(self.pieces) > 1:
            self.pieces = [np.concatenate(self.pieces)]
        return self.pieces[0] if self.pieces else np.zeros(0, dtype=np.float32)
