"""The process's own Prometheus metrics: what happens as it happens (prometheus-client).

What can be read off the server's state when it is scraped (sessions open, queue
depths, the pool) is collected then, in `transports/metrics.py`; these are the events
counted or timed as they pass: errors sent to clients by code, refusals by reason,
engine job latency by lane, transcription steps coalesced under load, and audio
refused from clients too far ahead of real time.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

ERRORS = Counter("dragoman_errors_total", "Error events and frames sent to clients, by error code.", ["code"])
REFUSALS = Counter("dragoman_refusals_total", "Connections and sessions refused, by reason.", ["reason"])
#: Observed by the speech front's decoder (sessions/speech/decoder.py), recorded by the driver.
STEPS_COALESCED = Counter(
    "dragoman_transcription_steps_coalesced_total",
    "Partial transcription steps skipped under load: still waiting for the engine when the next "
    "chunk came, their audio went into the next step.",
)
#: Observed by the speech front, which refuses the appends; recorded by the driver.
AUDIO_REFUSED_SECONDS = Counter(
    "dragoman_audio_refused_seconds_total",
    "Seconds of audio refused (input_audio_buffer_backlog): sent too far ahead of real time "
    "while other sessions kept to it.",
)
ENGINE_JOB_SECONDS = Histogram(
    "dragoman_engine_job_seconds",
    "Engine jobs from the start of their call to their result, by lane (engine role).",
    ["lane"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
)
#: Observed by the translation session (sessions/translation/session.py), recorded by the driver.
TRANSLATION_AUDIO_SECONDS = Counter(
    "dragoman_translation_audio_seconds_total",
    "Seconds of audio of translation sessions: taken in (source speech) and sent out (translated speech).",
    ["direction"],
)
TRANSLATION_END_LAG_SECONDS = Histogram(
    "dragoman_translation_end_lag_seconds",
    "Translation sessions: from the end of a segment's speech to its last translated text, on the "
    "input stream's clock (real time for a client at real-time pace).",
    buckets=(0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 20.0),
)
TRANSLATION_FIRST_TEXT_SECONDS = Histogram(
    "dragoman_translation_first_text_seconds",
    "Translation sessions: from the start of a segment's speech to its first translated text, on "
    "the input stream's clock.",
    buckets=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 12.0),
)
