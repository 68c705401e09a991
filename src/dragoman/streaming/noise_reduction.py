"""Streaming noise suppression for input audio: a spectral Wiener gain over a tracked noise floor.

OpenAI's `audio.input.noise_reduction` "filters audio added to the input audio buffer before
it is sent to VAD and the model"; `near_field` is for close-talking microphones, `far_field`
for laptop or conference-room ones, and a higher `strength` "applies more suppression".

Each 20 ms frame (half-overlapping, square-root Hann windows, which add back to the input
exactly) gets a gain per frequency bin from its a-priori SNR (the decision-directed estimate)
against a noise floor tracked by its running minimum, which rises slowly so that a louder
noise is learned within about a second. `strength` sets the deepest cut: 0 leaves the audio
as it is, 1 cuts stationary noise by the type's full depth. Far-field audio is cut deeper and
its noise estimate is weighted up, as room noise and reverberation sit closer to the speech.

The output has the input's length: it lags by two hops (20 ms), the first ones silence,
so a session's clock is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dragoman.audio.silence import FloatAudio

FRAME_MS = 20


@dataclass(frozen=True)
class Profile:
    #: The deepest cut at strength 1 (dB).
    max_cut_db: float
    #: The noise estimate is multiplied by this before the gain (over-subtraction).
    over: float


PROFILES = {
    "near_field": Profile(max_cut_db=18.0, over=1.0),
    "far_field": Profile(max_cut_db=26.0, over=1.6),
}
#: Smoothing of the a-priori SNR (decision-directed), and the noise floor's rise per second (dB).
DD_ALPHA = 0.96
FLOOR_RISE_DB_PER_S = 6.0
#: Power smoothing for the minimum tracker.
POWER_ALPHA = 0.8


class NoiseSuppressor:
    """One stream's suppressor: feed `process` the audio as it comes, in pieces of any size."""

    def __init__(self, rate: int, kind: str = "near_field", strength: float = 1.0) -> None:
        if kind not in PROFILES:
            raise ValueError(f"no noise reduction type {kind!r}")
        self.rate = rate
        self.hop = max(1, rate * FRAME_MS // 1000 // 2)
        self.size = 2 * self.hop
        n = np.arange(self.size)
        self._window = np.sqrt(0.5 - 0.5 * np.cos(2 * np.pi * n / self.size)).astype(np.float64)
        self._input = np.zeros(self.hop)  # the previous hop, the first half of the next frame
        self._overlap = np.zeros(self.hop)  # the previous frame's second half, to add
        self._pending = np.zeros(0)  # input short of a hop
        self._made = np.zeros(self.hop)  # output made and not yet given out, primed with a hop
        bins = self.size // 2 + 1
        self._power = np.zeros(bins)
        self._noise = np.zeros(bins)
        self._last_snr = np.ones(bins)
        self._frames = 0
        self._rise = 10 ** (FLOOR_RISE_DB_PER_S * self.hop / rate / 10)
        self.set(kind, strength)

    def set(self, kind: str, strength: float) -> None:
        """Change the type or strength; the noise floor learned so far is kept."""
        profile = PROFILES[kind]
        self.kind, self.strength = kind, min(1.0, max(0.0, strength))
        self._over = profile.over
        self._floor_gain = 10 ** (-profile.max_cut_db * self.strength / 20)

    def process(self, audio: FloatAudio) -> FloatAudio:
        """`audio`, suppressed, two hops (20 ms) late: as many samples out as in."""
        data = np.concatenate([self._pending, audio.astype(np.float64)])
        whole = len(data) // self.hop * self.hop
        self._pending = data[whole:]
        made = [self._made] + [self._frame(data[i : i + self.hop]) for i in range(0, whole, self.hop)]
        ready = np.concatenate(made)
        # At least one hop is always ready beyond what is owed (the primed hop of silence), so
        # an append short of a hop still gets its length back.
        out, self._made = ready[: len(audio)], ready[len(audio) :]
        return out.astype(np.float32)

    def _frame(self, hop: np.ndarray) -> np.ndarray:
        frame = np.concatenate([self._input, hop]) * self._window
        self._input = hop
        spectrum = np.fft.rfft(frame)
        power = spectrum.real**2 + spectrum.imag**2
        self._track(power)
        noise = self._over * self._noise + 1e-12
        post = power / noise
        prior = DD_ALPHA * self._last_snr + (1 - DD_ALPHA) * np.maximum(post - 1, 0.0)
        gain = np.maximum(prior / (1 + prior), self._floor_gain)
        if self.strength == 0.0:
            gain = np.ones_like(gain)
        cleaned = spectrum * gain
        self._last_snr = (gain**2) * post
        shaped = np.fft.irfft(cleaned, self.size) * self._window
        out = self._overlap + shaped[: self.hop]
        self._overlap = shaped[self.hop :]
        return out

    def _track(self, power: np.ndarray) -> None:
        """The noise floor: the running minimum of the smoothed power, rising slowly."""
        if self._frames == 0:
            self._power = power.copy()
            self._noise = power.copy()
        else:
            self._power = POWER_ALPHA * self._power + (1 - POWER_ALPHA) * power
            self._noise = np.minimum(self._noise * self._rise, self._power)
        self._frames += 1
