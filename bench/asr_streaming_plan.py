"""What one run of `python -m bench.asr_streaming` measures: the `Plan` its options build.

The streaming settings compared in-process (WER, revisions), the WER set's length range, the
step-cost audio, and the session counts and speech per session of the server loads; `--quick`
shrinks each of them to a smoke run.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.sessions.transcription.session import SessionConfig


@dataclass(frozen=True)
class Plan:
    quick: bool
    model: str
    #: Streaming settings compared in the WER and revision benchmarks (the first is the default).
    configs: tuple[tuple[str, SessionConfig], ...]
    wer_range: tuple[float, float]
    step_seconds: float
    sessions: tuple[int, ...]
    session_seconds: float
    batching_sessions: int

    #: The re-decode window of the first config (`--max-window`); the second has none.
    max_window: float = 10.0
    #: The ASR backend (`--backend`); None: the configured default.
    backend: str | None = None
    #: The server's engine calls at once (`--parallel-calls`); None: the server's choice.
    parallel_calls: int | None = None
    #: "server_vad": sessions of continuous speech whose items the server cuts
    #: (`bench.asr_continuous`); None: each session one item, committed by the client.
    turn_detection: str | None = None

    @classmethod
    def make(cls, quick: bool, model: str, max_window: float = 10.0) -> Plan:
        default = (
            f"default (chunk 2 s, unfixed 2 chunks / 5 tokens, window {max_window:g} s)",
            SessionConfig(language="en", max_window_seconds=max_window),
        )
        whole = (
            "window off (every step decodes the whole item)",
            SessionConfig(language="en", max_window_seconds=0.0),
        )
        faster = ("chunk 1 s", SessionConfig(language="en", chunk_seconds=1.0, max_window_seconds=max_window))
        if quick:
            return cls(True, model, (default, whole), (5.0, 9.0), 10.0, (1, 4), 10.0, 4, max_window)
        return cls(
            False,
            model,
            (default, whole, faster),
            (0.0, float("inf")),
            30.0,
            (1, 2, 4, 8, 16, 24),
            20.0,
            16,
            max_window,
        )
