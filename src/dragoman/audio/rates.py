"""Sample rates: the one every model and session runs at, and those a client may send."""

#: Whisper and Silero VAD both take 16 kHz mono; audio is resampled to it on arrival.
SAMPLE_RATE = 16_000

#: Input rates a client may declare. soxr handles any rate; these are the ones tested.
SUPPORTED_RATES: tuple[int, ...] = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
