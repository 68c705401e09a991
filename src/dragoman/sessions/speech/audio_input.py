"""The session's input stream: base64 PCM16 at the client's rate in, 16 kHz float32 out,
filtered on the way as the session's noise reduction says."""

from __future__ import annotations

from dragoman.audio.pcm import pcm16_to_float
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.resample import StreamResampler
from dragoman.engines.asr.base import FloatAudio
from dragoman.sessions.speech.config import NoiseReduction
from dragoman.streaming.noise_reduction import NoiseSuppressor


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
        #: The noise reduction's filter, at the input rate (`set_noise_reduction`).
        self._suppressor: NoiseSuppressor | None = None

    def decode(self, payload: str) -> tuple[FloatAudio, bytes]:
        """The append's samples at the input rate and the odd byte it leaves; raises InvalidAudio."""
        return pcm16_to_float(payload, self.carry)

    def accept(self, samples: FloatAudio, odd: bytes) -> FloatAudio:
        """Take decoded samples into the stream; returns the 16 kHz audio that is ready."""
        self.carry = odd
        self._taken += len(samples)
        if self._suppressor is not None:
            samples = self._suppressor.process(samples)  # as many samples out as in
        return self.resampler.process(samples)

    def set_noise_reduction(self, setting: NoiseReduction | None) -> None:
        """Filter what is accepted from now on as `setting` says. OpenAI's noise reduction "filters
        audio added to the input audio buffer before it is sent to VAD and the model". A change
        of type or strength keeps the noise floor learned so far."""
        if setting is None:
            self._suppressor = None
        elif self._suppressor is None:
            self._suppressor = NoiseSuppressor(self.rate, setting.type, setting.strength)
        else:
            self._suppressor.set(setting.type, setting.strength)

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
            if self._suppressor is not None:  # its frames and noise floor were at the old rate
                self._suppressor = NoiseSuppressor(rate, self._suppressor.kind, self._suppressor.strength)
