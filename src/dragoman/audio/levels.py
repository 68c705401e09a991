"""Speech of different loudness brought to one level before it shares an engine window.

Whisper normalises the log-mel spectrum of each window to its loudest part, so a quiet
speaker next to a loud one in the same window is read as background: in a 10-minute file
of eval recordings, a FLEURS recording 40 dB below its neighbours was dropped from the
transcript whenever it shared a window with them, and transcribed when it stood alone.
Scaling each speech span to one RMS level (within a bounded gain) keeps every speaker
audible to the model; the audio between spans is left as it is.

`frame_levels` is the short-time energy both this and the pause finders (streaming/sealing.py,
the Moonshine engine's trailing-quiet cut) read levels from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

#: The level every span is brought to (about -26 dBFS RMS, ordinary speech).
TARGET_RMS = 0.05
#: The most a span is raised: enough for a far or quiet speaker, not for a room's hum.
MAX_GAIN = 100.0  # 40 dB
#: Below this RMS a span is digital silence: it is left alone.
FLOOR_RMS = 1e-5


def even_levels(
    samples: npt.NDArray[np.float32],
    spans: Sequence[tuple[int, int]],
    *,
    target_rms: float = TARGET_RMS,
    max_gain: float = MAX_GAIN,
) -> npt.NDArray[np.float32]:
    """A copy of `samples` with each span [start, end) scaled to `target_rms` (gain at most
    `max_gain`; loud spans are lowered), clipped to [-1, 1]."""
    out = np.array(samples, dtype=np.float32, copy=True)
    for start, end in spans:
        span = out[max(0, start) : max(0, end)]
        if not len(span):
            continue
        rms = float(np.sqrt(np.mean(np.square(span, dtype=np.float64))))
        if rms < FLOOR_RMS:
            continue
        span *= min(target_rms / rms, max_gain)
    np.clip(out, -1.0, 1.0, out=out)
    return out


def frame_levels(
    audio: npt.NDArray[np.float32], rate: int, frame_seconds: float = 0.02
) -> tuple[npt.NDArray[np.float64], int]:
    """Per-frame energy in dB of `frame_seconds` frames (a partial last frame left out), and the
    frame length in samples."""
    frame = max(1, round(frame_seconds * rate))
    n = len(audio) // frame
    if n == 0:
        return np.zeros(0), frame
    frames = audio[: n * frame].astype(np.float64).reshape(n, frame)
    power = np.mean(frames * frames, axis=1)
    return 10.0 * np.log10(power + 1e-10), frame
