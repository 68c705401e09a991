"""Every recording of ../shared/eval (wav, flac, ogg/opus, aiff; 8-48 kHz; mono and stereo)
decodes through PyAV to 16 kHz mono of the length asr.tsv gives."""

from __future__ import annotations

import pytest

from dragoman.audio.files import decode_audio_file
from dragoman.tools.eval_set import asr_rows, eval_dir

FILES = sorted({row["file"]: float(row["duration_s"]) for row in asr_rows()}.items())


@pytest.mark.parametrize(("file", "seconds"), FILES, ids=[f for f, _ in FILES])
def test_eval_recording_decodes_to_its_length(file: str, seconds: float) -> None:
    audio = decode_audio_file((eval_dir() / file).read_bytes(), max_seconds=3600)
    assert audio.seconds == pytest.approx(seconds, abs=0.05)
    assert 0.0 < float(abs(audio.samples).max()) <= 1.0
