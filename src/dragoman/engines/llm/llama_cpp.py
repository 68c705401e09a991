"""The embedded LLM backend ("llama-cpp"): a GGUF model on llama.cpp, in the server's process.

The default, `llm.model = auto`, is the packaged Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)
where this CPU runs it fast enough for a spoken answer, else the 0.5B
(`model_choice`); `llm.model` may name a packaged model or a path to the user's own
GGUF. A model another engine (MT) already runs is shared, not loaded again
(`engines.llama_models`). Prompts come
from the model's own chat template (rendered by llama-cpp-python's Jinja2
formatter), which for Qwen2.5 lists the tools in the system prompt and writes
calls as `<tool_call>` blocks. The turn itself, from prefill to constrained tool
calls, is `llama_turn.Turn`.

KV reuse: the one llama.cpp sequence holds the conversation that spoke last.
When another conversation speaks, the sequence is copied out into a snapshot and
that conversation's own snapshot, if it has one, is put back
(`kv_snapshots`); either way only the tokens past the longest common prefix are
prefilled. Conversations of several sessions can so interleave on the one model.
The default instructions' tokens are kept apart from start-up (`warm_up`), so a new
conversation that begins with them never prefills them.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from dragoman.config import LLMSettings
from dragoman.cpu import available_cores
from dragoman.engines.info import EngineInfo
from dragoman.engines.llama_amx import weights_for_kernels
from dragoman.engines.llama_speed import SpeedSample, describe, measure, pick_by_speed
from dragoman.engines.llama_threads import idle_threads_setting
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    ContextLengthExceeded,
    Finished,
    ForcedTool,
    LLMCapabilities,
    LLMPiece,
)
from dragoman.engines.llm.grammar import call_grammar
from dragoman.engines.llm.kv_snapshots import ConversationCache, Snapshot, common_prefix
from dragoman.engines.llm.llama_runtime import LlamaRuntime, SpeedProbe
from dragoman.engines.llm.llama_turn import Turn, TurnPlan, plan_choice
from dragoman.engines.llm.markup import OPEN_TAG
from dragoman.engines.llm.model_choice import AUTO, QUALITY_MODEL, SPEED_MEMORY_FILE, choose
from dragoman.engines.llm.openai_format import chat_messages, chat_tools
from dragoman.engines.mt.presets import model_installed
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue, ModelUnavailable
from dragoman.logs import get_logger
from dragoman.weights import MODELS, gguf_file, resolve

log = get_logger(__name__)

#: GGUF `general.file_type` values of the common quantisations, for /health.
_FILE_TYPES = {
    0: "f32",
    1: "f16",
    2: "q4_0",
    3: "q4_1",
    7: "q8_0",
    15: "q4_k_m",
    17: "q5_k_m",
    18: "q6_k",
    32: "bf16",
}


class LlamaCppEngine:
    """Streams assistant turns from a GGUF model; thread-safe, one turn at a time."""

    def __init__(
        self,
        model_path: Path,
        *,
        name: str,
        threads: int,
        context_tokens: int,
        max_conversations: int,
        cache_mb: int,
        tool_result_note: str = "",
        idle_threads: int = 0,
    ) -> None:
        """`idle_threads`: the threads of a decode while no other engine call of the process
        computes (`engines.llama_threads`); at most `threads`: always `threads`."""
        self.name = name
        self._tool_result_note = tool_result_note
        self._runtime = LlamaRuntime(
            model_path, context_tokens=context_tokens, threads=threads, idle_threads=idle_threads
        )
        template = self._runtime.metadata.get("tokenizer.chat_template")
        if not template:
            self._runtime.close()
            raise ModelUnavailable(f"the GGUF model {model_path} has no chat template")
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._special_text("tokenizer.ggml.eos_token_id"),
            bos_token=self._special_text("tokenizer.ggml.bos_token_id"),
            add_generation_prompt=True,
        )
        self.capabilities = LLMCapabilities(
            tools=True,
            constrained_arguments=True,
            prefix_cache=True,
            context_tokens=self._runtime.n_ctx,
            remote=False,
        )
        self.kernels = self._runtime.backend.variant
        self._file_type = _FILE_TYPES.get(int(self._runtime.metadata.get("general.file_type", -1)), "gguf")
        self._cache = ConversationCache(max_conversations, cache_mb * 1024 * 1024)
        #: One turn at a time on the one sequence.
        self._run_lock = threading.Lock()
        #: Guards the conversation bookkeeping, which `forget` touches from any thread.
        self._keys_lock = threading.Lock()
        #: The conversation the sequence holds, and its tokens.
        self._loaded: str | None = None
        self._held: list[int] = []
        #: The conversation of the turn in progress, and whether it was forgotten meanwhile.
        self._running: str | None = None
        self._running_forgotten = False
        self._closed = False
        #: The default instructions' tokens and keys and values (`warm_up`).
        self._prefix: Snapshot | None = None
        #: How `auto` chose this model, for /health ("" when the model was named).
        self.choice = ""

    def _special_text(self, key: str) -> str:
        token = self._runtime.metadata.get(key)
        return self._runtime.token_text(int(token)) if token is not None else ""

    # -- the engine interface ---------------------------------------------------------------

    def stream(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> Finished:
        _validate(request)
        tools, call_first, single_call = plan_choice(request.tools, request.tool_choice)
        if tools:
            call_grammar(tools)  # a schema it cannot constrain is the request's fault: say so first
        prompt = self._runtime.tokenize(self._render(request))
        if call_first:
            prompt += self._runtime.tokenize_plain(OPEN_TAG + "\n")
        room = self._runtime.n_ctx - len(prompt) - 8  # 8: the closing tag of a call and a probe
        if room < 1:
            raise ContextLengthExceeded(
                f"the conversation ({len(prompt)} tokens) does not fit the model's context of "
                f"{self._runtime.n_ctx} tokens",
                param="messages",
            )
        plan = TurnPlan(
            prompt=prompt,
            tools=tools,
            offered=request.tools,
            call_first=call_first,
            single_call=single_call,
            max_new_tokens=min(room, request.max_tokens or room),
            answer_tokens=request.answer_tokens,
            temperature=request.temperature,
            seed=secrets.randbits(32),
        )
        with self._run_lock:
            if self._closed:
                raise ModelUnavailable(f"the {self.name} engine is closed")
            try:
                self._swap_in(request.conversation, prompt)
                outcome = Turn(self._runtime, plan, self._held, cancel, emit).run()
            except BaseException:
                self._drop_sequence()  # what the sequence holds is unknown now
                raise
            with self._keys_lock:
                self._held = outcome.sequence
                self._loaded = None if self._running_forgotten else request.conversation
                self._running = None
        return Finished(
            reason=outcome.reason,
            input_tokens=len(prompt),
            output_tokens=outcome.output_tokens,
            cached_tokens=outcome.cached_tokens,
        )

    def warm_up(self, instructions: str = "") -> None:
        """One short real turn; with `instructions`, their tokens are kept for every conversation
        that begins with them (the first turn of a session then prefills only its own words)."""
        system = (ChatMessage("system", instructions),) if instructions else ()
        request = ChatRequest(messages=(*system, ChatMessage("user", "Hi")), max_tokens=2)
        self.stream(request, CancelToken(), lambda piece: None)
        if not instructions:
            return
        # The rendered system part: what two prompts that differ in the user's words share.
        other = self._runtime.tokenize(
            self._render(ChatRequest(messages=(*system, ChatMessage("user", "?"))))
        )
        shared = common_prefix(self._held, other)
        with self._run_lock, self._keys_lock:
            self._runtime.truncate(shared)
            self._held = self._held[:shared]
            self._loaded = None
            self._prefix = Snapshot(tuple(self._held), self._runtime.snapshot())
        log.info("llm instructions cached", tokens=shared)

    def measure_speed(self) -> SpeedSample:
        """This model's prefill and decode speed here, on an empty sequence (`llama_speed.measure`)."""
        prompt = self._runtime.tokenize(self._render(ChatRequest(messages=(ChatMessage("user", _PROBE),))))
        with self._run_lock, self._keys_lock:
            self._held, self._loaded = [], None
            probe = SpeedProbe(self._runtime)
            try:
                return measure(probe, prompt)
            finally:
                probe.close()

    def describe(self) -> EngineInfo:
        rt = self._runtime
        return EngineInfo(
            name=self.name,
            backend="llama-cpp",
            compute_type=self._file_type,
            compute_reason=(
                f"GGUF {self._file_type}, {rt.backend.describe()}, {rt.idle.describe()}, "
                f"context {rt.n_ctx} tokens" + (f"; auto: {self.choice}" if self.choice else "")
            ),
        )

    def forget(self, conversation: str) -> None:
        """Drop the conversation's snapshot; cheap and safe from any thread, even mid-turn."""
        with self._keys_lock:
            self._cache.forget(conversation)
            if self._running == conversation:
                self._running_forgotten = True  # its turn ends after this: keep nothing of it
            if self._loaded == conversation:
                # The tokens stay for content reuse; they are just no longer anyone's to save.
                self._loaded = None

    def close(self) -> None:
        with self._run_lock:
            if not self._closed:
                self._closed = True
                self._cache.clear()
                self._runtime.close()

    # -- conversations ----------------------------------------------------------------------

    def _swap_in(self, conversation: str | None, prompt: list[int]) -> None:
        """Make the sequence hold the tokens that share the longest prefix with `prompt`."""
        with self._keys_lock:
            self._running, self._running_forgotten = conversation, False
            if conversation is not None and conversation == self._loaded:
                return
            if self._loaded is not None:
                # Save the conversation that spoke last before this turn overwrites it.
                snapshot = Snapshot(tuple(self._held), self._runtime.snapshot())
                evicted = self._cache.put(self._loaded, snapshot)
                if evicted:
                    log.debug("llm conversations evicted", conversations=evicted)
                self._loaded = None
            saved = self._cache.get(conversation) if conversation is not None else None
            best = common_prefix(self._held, prompt)
            for candidate in (saved, self._prefix):
                if candidate is not None and common_prefix(candidate.tokens, prompt) > best:
                    self._runtime.restore(candidate.data)
                    self._held = list(candidate.tokens)
                    best = common_prefix(candidate.tokens, prompt)
            if conversation is not None:
                self._cache.forget(conversation)  # the sequence holds it now

    def _drop_sequence(self) -> None:
        with self._keys_lock:
            self._runtime.truncate(0)
            self._held = []
            self._loaded = self._running = None

    def _render(self, request: ChatRequest) -> str:
        # tool_choice "none": a small model shown tools calls them anyway, so they are not shown.
        shown = request.tools if request.tool_choice != "none" else ()
        tools = chat_tools(shown) if shown else None
        shown_messages = request.messages
        if self._tool_result_note and shown_messages[-1].role == "tool":
            shown_messages = (*shown_messages, ChatMessage("system", self._tool_result_note))
        messages: Any = chat_messages(shown_messages, for_template=True)  # the TypedDicts' shape
        rendered = self._formatter(messages=messages, tools=cast(Any, tools))
        return str(rendered.prompt)


#: The speed probe's user turn: a spoken question's kind of text.
_PROBE = "What is the capital of France, and how many people live in Paris and its suburbs today?"


def _validate(request: ChatRequest) -> None:
    if not request.messages:
        raise InvalidValue("a chat request needs at least one message", param="messages")
    names = [tool.name for tool in request.tools]
    if len(set(names)) != len(names):
        raise InvalidValue("tool names must be unique", param="tools")
    choice = request.tool_choice
    if isinstance(choice, ForcedTool) and choice.name not in names:
        raise InvalidValue(
            f"tool_choice names {choice.name!r}, which is not among the tools", param="tool_choice"
        )
    if choice == "required" and not names:
        raise InvalidValue("tool_choice 'required' needs at least one tool", param="tool_choice")
    if request.max_tokens is not None and request.max_tokens < 1:
        raise InvalidValue("max_tokens must be at least 1", param="max_tokens")
    if request.answer_tokens is not None and request.answer_tokens < 1:
        raise InvalidValue("answer_tokens must be at least 1", param="answer_tokens")


def default_threads() -> int:
    """Half the cores, at least one, for an engine built outside the server (bench, tests).

    The server sets `threads` itself from its CPU budget.
    """
    return max(1, available_cores() // 2)


def create(settings: LLMSettings, cache_dir: Path) -> LlamaCppEngine:
    """The registry's factory: `llm.model` is `auto`, a packaged model name or a path to a GGUF file."""
    if settings.model == AUTO:
        return _create_auto(settings, cache_dir)
    return _create(settings.model, settings, cache_dir)


def _create(model: str, settings: LLMSettings, cache_dir: Path) -> LlamaCppEngine:
    path = gguf_file(resolve(model, cache_dir, role="llm"))
    name = model if model in MODELS else path.stem
    return LlamaCppEngine(
        weights_for_kernels(path, cache_dir),
        name=name,
        threads=settings.threads or default_threads(),
        context_tokens=settings.context_tokens,
        max_conversations=settings.max_conversations,
        cache_mb=settings.cache_mb,
        tool_result_note=settings.tool_result_note,
        idle_threads=idle_threads_setting(settings.idle_threads),
    )


def _create_auto(settings: LLMSettings, cache_dir: Path) -> LlamaCppEngine:
    """`auto`: the 1.5B where installed and measured fast enough here, else the 0.5B (`model_choice`)."""
    installed = model_installed(QUALITY_MODEL, cache_dir)
    pick = pick_by_speed(
        QUALITY_MODEL,
        installed=installed,
        load=lambda model: _create(model, settings, cache_dir),
        memory_path=Path(cache_dir).expanduser() / SPEED_MEMORY_FILE,
        choose=lambda sample: choose(sample, quality_installed=installed),
        model_of=lambda choice: choice.model,
    )
    engine = pick.engine
    engine.choice = pick.choice.reason
    log.info(
        "LLM model chosen",
        model=engine.name,
        reason=pick.choice.reason,
        measured_now=describe(pick.measured),
        measured_s=None if pick.measured is None else round(pick.measured.seconds, 2),
    )
    return engine
