"""The session's input stream: base64 PCM16 at the client's rate in, 16 kHz float32 out."""

from __future__ import annotations

from dragoman.audio.pcm import pcm16_to_float
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.resample import StreamResampler
from dragoman.engines.asr.base import FloatAudio


class AudioInput:
    """Decodes appends (carrying the odd byte) and resamples them as they arrive.

    `decode` is side-effect free so that an append can be checked (against the item
    cap) before anything about the stream changes; `accept` then takes it.

    `clock` is the session's one input clock: every sample taken, at whatever rate it
    came, in 16 kHz samples (input samples x 16000 / rate). The resampler's output
    falls behind it by what its lookahead holds, and a clear drops that, or a drain
    rounds it up; whoever keeps a timeline of the output realigns on `clock` when the
    stream starts over.
    """

    def __init__(self, rate: int = SAMPLE_RATE) -> None:
        self.rate = rate
        self.carry = b""
        self.resampler = StreamResampler(rate, SAMPLE_RATE)
        #: The clock when the current rate took over, and the samples taken at it since.
        self._clock_base = 0
        self._taken = 0

    def decode(self, payload: str) -> tuple[FloatAudio, bytes]:
        """The append's samples at the input rate and the odd byte it leaves; raises InvalidAudio."""
        return pcm16_to_float(payload, self.carry)

    def accept(self, samples: FloatAudio, odd: bytes) -> FloatAudio:
        """Take decoded samples into the stream; returns the 16 kHz audio that is ready."""
        self.carry = odd
        self._taken += len(samples)
        return self.resampler.process(samples)

    def model_samples(self, input_samples: int) -> int:
        """How many 16 kHz samples `input_samples` at the input rate make, rounded once."""
        return round(input_samples * SAMPLE_RATE / self.rate)

    @property
    def clock(self) -> int:
        """Every sample taken so far, in 16 kHz samples: where the next one is on the timeline."""
        return self._clock_base + self.model_samples(self._taken)

    def drain(self) -> FloatAudio:
        """What the resampler still holds, as if the stream paused here (on a commit)."""
        return self.resampler.drain()

    def reset(self) -> None:
        """A clear: drop the odd byte and whatever the resampler holds."""
        self.carry = b""
        self.resampler.reset()

    @property
    def empty(self) -> bool:
        return not self.carry and self.resampler.held == 0

    def set_rate(self, rate: int) -> None:
        """Change the input rate; the caller checks that the buffer is empty first."""
        if rate != self.rate:
            self._clock_base, self._taken = self.clock, 0
            self.rate = rate
            self.resampler = StreamResampler(rate, SAMPLE_RATE)
