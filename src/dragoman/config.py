"""Server settings: defaults < config file (TOML) < environment (DRAGOMAN_*) < command-line flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from dragoman.errors import ConfigError
from dragoman.logs import LogLevel

Service = Literal["transcription", "mt", "agent", "interpreter"]
#: The script Chinese transcripts are written in (`engines/asr/chinese_script.py`).
ChineseScript = Literal["simplified", "traditional", "heard"]
SERVICES: tuple[Service, ...] = ("transcription", "mt", "agent", "interpreter")


def default_cache_dir() -> Path:
    """`DRAGOMAN_CACHE_DIR`, else ~/.cache/dragoman: the same folder whoever asks."""
    configured = os.environ.get("DRAGOMAN_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "dragoman"


def _comma_items(value: str | list[object]) -> list[str]:
    """A flag given once or repeated, each time one item or several comma-separated ("a,b"),
    as the stripped items."""
    entries = [value] if isinstance(value, str) else value
    return [item.strip() for entry in entries for item in str(entry).split(",") if item.strip()]


def _by_language(value: object, form: str) -> object:
    """`en=moonshine` (a flag given once or repeated) and `en=moonshine,de=...` as well as a
    mapping, as {language: value}; `form` names what an item is, for the error."""
    if isinstance(value, dict):
        return {str(language).strip().lower(): item for language, item in value.items()}
    if not isinstance(value, str | list):
        return value
    mapping: dict[str, str] = {}
    for item in _comma_items(value):
        language, sep, named = item.partition("=")
        if not sep or not language.strip() or not named.strip():
            raise ValueError(f"{form}, not {item!r}")
        mapping[language.strip().lower()] = named.strip()
    return mapping


def _asr_routes(value: object) -> object:
    """`--asr-route en=moonshine` (repeatable) and `en=moonshine,de=...` as well as a mapping."""
    return _by_language(value, "an ASR route is LANGUAGE=BACKEND[:MODEL]")


class ASRSettings(BaseModel):
    #: Backend name (see dragoman.engines.registry).
    backend: str = "whisper-ct2"
    #: A packaged model name (`dragoman models`) or a path to the user's own weights,
    #: e.g. a CTranslate2 Whisper small or large-v3 folder.
    model: str = "whisper-base"
    compute_type: str = "int8"
    device: str = "cpu"
    #: Threads the engine's calls use together (0: the server gives each engine an equal
    #: share of the cores).
    threads: int = Field(default=0, ge=0)
    #: Engine calls that run at once, sharing `threads` (0: on a CPU, one call per thread;
    #: else 1). A backend that cannot run calls at once runs one on all the threads.
    parallel_calls: int = Field(default=0, ge=0)
    beam_size: int = Field(default=1, ge=1)
    #: Languages that another local backend transcribes: {"en": "moonshine"} sends English steps
    #: to Moonshine base and the rest to `backend` (`engines/asr/by_language.py`). A value may
    #: name the model too, "moonshine:/path/to/folder"; without one the backend serves its own
    #: packaged default. Unused with `base_url`, where the remote server transcribes everything.
    routes: dict[str, str] = Field(default_factory=dict)
    #: Most step requests one engine call may carry.
    max_batch: int = Field(default=16, ge=1)
    #: The script of Chinese transcripts, the local Whisper's and a remote server's (Whisper
    #: writes Mandarin in either, as it happens): "simplified", "traditional", or "heard".
    chinese_script: ChineseScript = "simplified"
    #: A remote ASR server's OpenAI-compatible /v1 URL (another dragoman, vLLM serving Whisper,
    #: speaches, OpenAI), which then transcribes every step (`engines/asr/openai_transcriptions.py`);
    #: unset: the local `backend`. Its API key (may be empty; never logged), the model to ask
    #: for, the seconds to wait for a connect and for an answer, the connects retried before a
    #: step fails, and the requests in flight at once.
    base_url: str | None = None
    api_key: str = ""
    remote_model: str = "whisper-1"
    timeout_s: float = Field(default=60.0, gt=0)
    connect_retries: int = Field(default=2, ge=0, le=10)
    max_concurrent: int = Field(default=8, ge=1, le=256)

    @field_validator("routes", mode="before")
    @classmethod
    def _parse_routes(cls, value: object) -> object:
        return _asr_routes(value)


class FileTranscriptionSettings(BaseModel):
    """`POST /v1/audio/transcriptions`: uploaded files, on the live sessions' ASR worker."""

    #: The largest upload taken (OpenAI's limit, 25 MB); past it the request gets 413.
    max_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    #: The longest decoded audio taken (an hour of 16 kHz float32 is 230 MB in memory).
    max_seconds: float = Field(default=3600.0, gt=0)
    #: Files transcribed at once, and files waiting for a turn; past both the request gets 429.
    max_concurrent: int = Field(default=2, ge=1)
    max_waiting: int = Field(default=8, ge=0)
    #: A file is cut at pauses into windows of at most this long (the engine's limit applies
    #: when smaller), and at most `windows_in_flight` windows of all files wait on the engine
    #: at once: they batch with each other and fill the slots live steps leave, at a lower
    #: priority, while a flood of files cannot hold the engine for long.
    window_seconds: float = Field(default=28.0, gt=1.0)
    windows_in_flight: int = Field(default=4, ge=1)


class TranscriptionSettings(BaseModel):
    #: Transcription sessions open at once; past it a session gets `session_limit_reached`.
    max_sessions: int = Field(default=16, ge=1)
    chunk_seconds: float = Field(default=2.0, gt=0)
    unfixed_chunks: int = Field(default=2, ge=0)
    unfixed_tokens: int = Field(default=5, ge=0)
    #: MAX_ITEM_SECONDS; the engine's max_audio_seconds applies when smaller.
    max_item_seconds: float = Field(default=300.0, gt=0)
    #: The longest audio one re-decode step transcribes: past it the item's stable head is
    #: sealed at a pause and the next window starts there (0: every step decodes the whole item).
    max_window_seconds: float = Field(default=10.0, ge=0)
    files: FileTranscriptionSettings = Field(default_factory=FileTranscriptionSettings)


class MTSettings(BaseModel):
    backend: str = "qwen-llama"
    #: auto: `low_latency` (the 1.5B) where it is installed and measures fast enough at start-up,
    #: else `fast` (the 0.5B); see dragoman.engines.mt.model_choice.
    preset: str = "auto"
    max_sessions: int = Field(default=4, ge=1)
    max_utterance_words: int = Field(default=60, ge=1)
    #: Finals of one session that may wait for the engine; past it a final gets processing_failed.
    max_queued_finals: int = Field(default=16, ge=1)
    #: A packaged model name or a path to the user's own weights; None takes the preset's.
    #: For `ct2-seq2seq`: a CTranslate2 Marian/OPUS-MT or NLLB folder.
    model: str | None = None
    #: Directions a seq2seq model serves ("en-de"); the qwen-torch backend reads them from heads files.
    directions: list[str] = Field(default_factory=list)
    device: str = "cpu"
    #: auto: int8 where the CPU has VNNI or AMX and measures it faster, float32 elsewhere
    #: (qwen-torch; see engines/torch_lm/load); CTranslate2's own choice for ct2-seq2seq.
    compute_type: str = "auto"
    #: Threads per engine call (0: the server gives each engine an equal share of the cores).
    threads: int = Field(default=0, ge=0)
    #: qwen-llama: engines on the one model, each with a context of its own, so that drafts of
    #: different sessions compute at once (engines/mt/lanes.py). 0: as many as `threads`-sized
    #: shares fit the cores (2 on 2 cores beside ASR; 1 where MT has every core), at most 4.
    lanes: int = Field(default=0, ge=0, le=16)
    #: qwen-llama: the threads of each decode while no other engine call of the process computes
    #: and other processes leave its cores idle, as `llm.idle_threads` (engines/llama_threads).
    #: None: every core this process may use; 0 or at most `threads`: always `threads`.
    idle_threads: int | None = Field(default=None, ge=0)
    #: qwen-torch: verify the previous draft's tokens in the prompt pass instead of decoding them again.
    speculate: bool = True
    #: qwen-llama: source tokens that may be inserted before the kept assistant header and
    #: target prefix of an utterance instead of recomputing them, until they are recomputed
    #: (their keys and values never saw those words). 0: recompute them on every update.
    stale_budget: int = Field(default=0, ge=0)
    #: Extra folder of alignment-heads files, searched before the packaged ones.
    heads_dir: Path | None = None
    #: A remote chat-completions server's OpenAI-compatible /v1 URL (vLLM, llama.cpp's server,
    #: OpenAI), which then translates by re-translation and LocalAgreement, not AlignAtt
    #: (`engines/mt/chat_translation.py`); unset: the local `backend`. Its API key (may be
    #: empty; never logged), the model to ask for, the seconds to wait for a connect and for an
    #: answer, and the connects retried before a draft fails.
    base_url: str | None = None
    api_key: str = ""
    remote_model: str = "gpt-4o-mini"
    timeout_s: float = Field(default=30.0, gt=0)
    connect_retries: int = Field(default=2, ge=0, le=10)
    #: `dragoman mt-server` nodes (`ws://host:port/`, or another dragoman's `ws://host:port/v1/mt`)
    #: that run the MT model and AlignAtt for this server over MT protocol v1
    #: (`engines/mt/mt_protocol_remote.py`); each MT session is opened on one, by `node_balance`
    #: (`round-robin` or `least-loaded`). Uses `api_key`, `timeout_s` and `connect_retries`;
    #: `max_concurrent` drafts wait on nodes at once. Unset: the local `backend`.
    nodes: list[str] = Field(default_factory=list)
    node_balance: Literal["round-robin", "least-loaded"] = "least-loaded"
    max_concurrent: int = Field(default=16, ge=1, le=256)

    @field_validator("nodes", mode="before")
    @classmethod
    def _split_nodes(cls, value: object) -> object:
        """`--mt-node a,b` and `DRAGOMAN_MT__NODES=a,b` as well as a list."""
        return _comma_items(value) if isinstance(value, str | list) else value


class LLMSettings(BaseModel):
    """The voice agent's LLM (see dragoman.engines.llm)."""

    #: Backend name: llama-cpp (embedded), chat-completions or responses (an OpenAI-compatible server).
    backend: str = "llama-cpp"
    #: llama-cpp: `auto` (the 1.5B where this CPU, with the agent's threads, measures fast enough for
    #: a spoken answer, else the 0.5B: engines/llm/model_choice), a packaged model name (`dragoman
    #: models`) or a path to the user's own GGUF file.
    model: str = "auto"
    #: llama-cpp: threads per engine call (0: the server gives each engine an equal share of the cores).
    threads: int = Field(default=0, ge=0)
    #: llama-cpp: the threads of each token decoded while no other engine call of the process
    #: computes and other processes leave its cores idle (checked before every token, so a TTS,
    #: ASR or MT call that starts gets its core back at the next one; engines/llama_threads):
    #: beside other services the LLM borrows the core it leaves them. None: every core this
    #: process may use; 0 or at most `threads`: always `threads`.
    idle_threads: int | None = Field(default=None, ge=0)
    #: llama-cpp: the context of a conversation, prompt and reply (the model's own limit applies).
    context_tokens: int = Field(default=4096, ge=256)
    #: llama-cpp: conversations whose KV cache is kept between turns, least recently used dropped
    #: first, and the memory they may take (about 12 KB a token for the 0.5B, 28 KB for the 1.5B).
    max_conversations: int = Field(default=16, ge=0)
    cache_mb: int = Field(default=512, ge=0)
    #: The sampling temperature of the agent's requests (0: greedy, the most reliable tool calls).
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    #: llama-cpp: a system note put after tool results when they end the conversation. Without it
    #: the packaged 0.5B calls the same tool again instead of answering (8 of 8 tries); with it, it
    #: answered from the result 8 of 8 times. Empty: none.
    tool_result_note: str = (
        "The tool answered. Now answer the user in one sentence from the tool result; "
        "do not call a tool again."
    )
    #: Remote backends: the server's OpenAI-compatible base URL, its API key (may be empty; never
    #: logged) and the model name to ask for (empty: the first model the server lists).
    base_url: str = "http://127.0.0.1:8080/v1"
    api_key: str = ""
    remote_model: str = ""
    #: Remote backends: seconds to wait for the server to connect and to answer.
    timeout_s: float = Field(default=60.0, gt=0)


class TTSSettings(BaseModel):
    #: The voice of a session that names none: a name of dragoman.engines.tts.voices.
    voice: str = "hibari"
    #: TTS backends to load (see dragoman.engines.registry); the others' voices are unknown.
    backends: list[str] = Field(default_factory=lambda: ["hibari", "piper", "kokoro", "espeak-ng"])
    #: onnxruntime threads per backend (0: the server gives each engine an equal share of the cores).
    threads: int = Field(default=0, ge=0)
    #: A remote TTS server's OpenAI-compatible /v1 URL (another dragoman, OpenAI, Kokoro-FastAPI,
    #: speaches), which then speaks every voice (`engines/tts/openai_speech.py`); unset: local voices.
    base_url: str | None = None
    #: Its API key (may be empty; never logged), the model to ask for, the seconds to wait for a
    #: connect and for each piece of audio, and the connects retried before a clause fails.
    api_key: str = ""
    remote_model: str = "tts-1"
    timeout_s: float = Field(default=30.0, gt=0)
    connect_retries: int = Field(default=2, ge=0, le=10)


class AgentSettings(BaseModel):
    """The voice agent on `/v1/realtime` (its STT is the transcription service's engine)."""

    #: Concurrent agent sessions (`--num-pipelines`); the units share one copy of each engine.
    num_pipelines: int = Field(default=1, ge=1)
    #: The instructions of a session that sets none.
    instructions: str = (
        "You are a concise voice assistant. Your answers are spoken aloud: answer directly in one "
        "or two short, plain sentences, with no lists and no markdown."
    )
    #: Added to the instructions of a response that may call tools ("" leaves them as they are).
    #: Small models get the call-or-answer decision wrong both ways (bench.agent_tools: 16
    #: requests for a tool, 30 questions and remarks for none, under the server's instructions,
    #: a one-line persona and instructions that name the tools). The old text ("You have tools,
    #: and you call them yourself: when one answers the user's request, call it; never describe a
    #: call to the user.") had the 1.5B call a tool for 30 and 28 of the 30 under a client's own
    #: instructions ("What is the capital of France?" -> get_weather(Paris)); this one, with
    #: `<tools>` read as a call (engines/llm/markup.py), for none of them, while it calls 15, 15
    #: and 16 of the 16 right. Without "You have tools, and you call them yourself" it described
    #: the call for "What is the weather in Paris right now?" instead of making it.
    tool_preamble: str = (
        "Answer questions, greetings and remarks yourself, in words, in one or two short sentences. "
        "You have tools, and you call them yourself: when the user asks for exactly what one of "
        "them does, call it at once; never tell the user about a tool or how to call it."
    )
    #: Most characters of conversation shown to the LLM (the oldest items go first).
    context_chars: int = Field(default=12_000, ge=500)
    #: A response's token cap when the client sets none.
    max_output_tokens: int = Field(default=512, ge=1)
    #: A spoken answer's soft length when the client sets no `max_output_tokens`: past this many
    #: tokens the answer ends at the next sentence end and completes (see engines/llm/reply_guard).
    answer_tokens: int = Field(default=48, ge=1)
    #: Expose a remote LLM backend as `POST /v1/chat/completions` or `/v1/responses`. Like every
    #: route, it needs one of `api_keys` when the server has keys; nothing rate-limits it.
    enable_llm_proxy: bool = False


class InterpreterSettings(BaseModel):
    """The interpreter: OpenAI's Realtime translation sessions on `/v1/realtime/translations`,
    composed of the transcription, MT and TTS engines (it loads the first two when enabled)."""

    #: Translation sessions open at once; past it a session gets `session_limit_reached`.
    max_sessions: int = Field(default=4, ge=1)
    #: The target language of a session that names none (ISO 639-1).
    language: str = "de"
    #: The language spoken to the interpreter; it translates into the targets of the MT
    #: directions from it that have calibrated heads. "auto": each segment's language is
    #: detected (a multilingual Whisper), so speakers of every source language share a server.
    source_language: str = "en"
    #: `asr.routes` for the interpreter's steps only, before the server's: English source speech
    #: goes to Moonshine base, which lifted the BLEU of English speech into German and Italian
    #: (docs/interpreter.md) while transcription sessions keep Whisper's cheaper steps. `{}`
    #: (`DRAGOMAN_INTERPRETER__ASR_ROUTES=`): the server's routes only.
    asr_routes: dict[str, str] = Field(default_factory=lambda: {"en": "moonshine"})
    #: The voice of each target language, by name (docs/voices.md); a language not named gets its
    #: best loaded voice (`VoiceCatalog.for_language`). German is espeak-ng's, as issue 25 asks:
    #: Kokoro's Italian voice reading German is heard far better (round-trip WER 39 against 60 %)
    #: but takes the CPU two sessions' MT needs, and their text end lag went past the 2.5 s bound
    #: (2026-12-07, Zen 5: 2.35-2.81 s against 1.95-2.10 s, docs/interpreter.md).
    #: `de=kokoro-de-nicola` chooses it; `{}` (`DRAGOMAN_INTERPRETER__VOICES=`): the best voices.
    voices: dict[str, str] = Field(default_factory=lambda: {"de": "espeak-de"})

    @field_validator("asr_routes", mode="before")
    @classmethod
    def _parse_routes(cls, value: object) -> object:
        return _asr_routes(value)

    @field_validator("voices", mode="before")
    @classmethod
    def _parse_voices(cls, value: object) -> object:
        return _by_language(value, "an interpreter voice is LANGUAGE=VOICE")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGOMAN_", env_nested_delimiter="__", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_level: LogLevel = "info"
    log_format: Literal["auto", "json", "console"] = "auto"
    #: Where assembled models live; reused across clones and CI runs.
    cache_dir: Path = Field(default_factory=default_cache_dir)
    #: Which services to load at start-up.
    services: list[Service] = Field(default_factory=lambda: list(SERVICES))
    #: Keys clients must send (`Authorization: Bearer KEY`) on every endpoint but /health;
    #: none: the server is open (fine on loopback; a warning on any other address).
    api_keys: list[str] = Field(default_factory=list)
    #: A file of keys, one per line (blank lines and `#` comments ignored), added to api_keys.
    api_keys_file: Path | None = None
    #: WebSocket connections open at once, over every service.
    max_connections: int = Field(default=64, ge=1)
    #: The largest WebSocket message taken; a bigger one gets an error event and a 1009 close.
    #: OpenAI's clients send audio in appends of well under this (100 ms of 24 kHz audio is 6 KB).
    max_message_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    #: A session that sends nothing for this long is closed with a clear reason.
    idle_timeout_s: float = Field(default=300.0, gt=0)
    #: An engine call (a streaming one: between two pieces) that takes longer is given up as
    #: hung: its session is told (with an error id), the others go on.
    engine_timeout_s: float = Field(default=120.0, gt=0)
    #: Audio a client may send ahead of real time, while other sessions keep to real time,
    #: before its appends are refused (`transports/real_time.py`); 0 takes every client's audio
    #: as fast as it comes.
    audio_burst_s: float = Field(default=10.0, ge=0)
    #: Signs the ephemeral `ek_` keys, so that every replica that shares it accepts a key any of
    #: them minted (at least 32 bytes); unset: a random key per process.
    client_secret_key: SecretStr | None = None
    #: Redis shared by the replicas (`redis://host:6379/0`): an `ek_` key then opens one session
    #: across all of them, not one per replica.
    redis_url: str | None = None
    #: On SIGTERM, how long open sessions run on (while /health answers 503 draining and new
    #: sessions are refused) before they are closed with 1001.
    drain_seconds: float = Field(default=25.0, ge=0)
    #: This replica's name among those behind one load balancer (letters, digits, `-`): it is
    #: put in every WebRTC call id (`rtc_<replica>_<random>`), so that the balancer can send a
    #: call's `DELETE` and its sideband (`?call_id=`) to the replica that holds the call.
    replica_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9-]{1,32}$")
    asr: ASRSettings = Field(default_factory=ASRSettings)
    transcription: TranscriptionSettings = Field(default_factory=TranscriptionSettings)
    mt: MTSettings = Field(default_factory=MTSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    tts: TTSSettings = Field(default_factory=TTSSettings)
    interpreter: InterpreterSettings = Field(default_factory=InterpreterSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if _CONFIG_FILE is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=_CONFIG_FILE))
        return tuple(sources)


_CONFIG_FILE: Path | None = None


def read_api_keys(settings: Settings) -> list[str]:
    """`api_keys` and the keys of `api_keys_file`, in that order, without duplicates."""
    keys = list(settings.api_keys)
    if settings.api_keys_file is not None:
        try:
            lines = settings.api_keys_file.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read the API keys file {settings.api_keys_file}: {exc}") from exc
        keys += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return list(dict.fromkeys(key for key in keys if key))


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; `overrides` (from flags) win over the environment and the file.

    Nested overrides use dotted keys: {"asr.model": "/models/whisper-small"}.
    """
    global _CONFIG_FILE
    _CONFIG_FILE = config_file
    try:
        nested: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            target = nested
            *parents, leaf = key.split(".")
            for part in parents:
                target = target.setdefault(part, {})
            target[leaf] = value
        base = Settings()
        if not nested:
            return base
        merged = _deep_merge(base.model_dump(), nested)
        return Settings.model_validate(merged)
    finally:
        _CONFIG_FILE = None


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
