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
#: Counted by the speech front (sessions/speech/front.py), the one place that knows.
STEPS_COALESCED = Counter(
    "dragoman_transcription_steps_coalesced_total",
    "Partial transcription steps skipped under load: still waiting for the engine when the next "
    "chunk came, their audio went into the next step.",
)
#: Counted by the speech front, which refuses the appends.
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
