"""`llm.model = auto`: the voice agent's brain is the 1.5B where this CPU runs it fast enough.

On everyday questions the packaged Qwen2.5-Coder-1.5B answers right far more often
than the 0.5B (bench/RESULTS.md, `bench.agent_accuracy`), but it is three times the
work per token, and the agent's answer is on the user's clock: what counts is the
time from the end of the user's turn to the first spoken clause. On the LLM that is
the prefill of the user's turn (the instructions before it are cached: the engine
keeps their keys and values from start-up) and the decode of a first clause. So
`auto` measures the 1.5B at start-up with the threads the agent will have
(`engines.llama_speed`, as MT's `auto` does), remembers the best speed seen on this
CPU, and keeps the 1.5B when that first clause takes at most `FIRST_CLAUSE_BUDGET_S`;
elsewhere it takes the 0.5B. An explicit `llm.model` is never second-guessed.

`choose` is the rule, a pure function of the numbers so it can be tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dragoman.cpu import available_cores
from dragoman.engines import llama_speed
from dragoman.engines.llama_speed import SpeedMemory, SpeedSample

AUTO = "auto"
QUALITY_MODEL = "qwen2.5-1.5b-instruct-gguf"
FAST_MODEL = "qwen2.5-0.5b-instruct-gguf"
#: The remembered best speeds, in the model cache (apart from MT's: another context, other threads).
SPEED_MEMORY_FILE = "llm-speed.json"
#: Tokens the LLM prefills after the end of a turn: a spoken question of about ten words with
#: its chat markup ("<|im_start|>user\n…<|im_end|>\n<|im_start|>assistant\n").
TURN_TOKENS = 20
#: Tokens of a first spoken clause ("The capital of France is Paris.").
CLAUSE_TOKENS = 8
#: The most the LLM may take to a first clause. The goal is first audio within 1.0 s of the
#: end of speech (p50); the turn's final transcript and the first TTS chunk take about a
#: third of it on 2 cores.
FIRST_CLAUSE_BUDGET_S = 0.7


@dataclass(frozen=True)
class LLMChoice:
    model: str
    reason: str


def first_clause_seconds(sample: SpeedSample) -> float:
    """The LLM's time from the end of a turn to a first clause at `sample`'s speeds."""
    return TURN_TOKENS / max(sample.prefill_tok_s, 1e-6) + CLAUSE_TOKENS / max(sample.decode_tok_s, 1e-6)


def choose(sample: SpeedSample | None, *, quality_installed: bool) -> LLMChoice:
    """The model `auto` runs: the 1.5B where installed and fast enough, else the 0.5B."""
    if not quality_installed:
        return LLMChoice(FAST_MODEL, "the 1.5B model is not installed (dragoman models install)")
    if sample is None:
        return LLMChoice(FAST_MODEL, "the 1.5B model could not be measured")
    seconds = first_clause_seconds(sample)
    speeds = (
        f"the 1.5B prefills {sample.prefill_tok_s:.0f} tok/s and decodes {sample.decode_tok_s:.1f} tok/s "
        f"on {sample.threads} thread{'s' if sample.threads != 1 else ''}: a first clause in {seconds:.2f} s"
    )
    budget = f"(budget {FIRST_CLAUSE_BUDGET_S:g} s)"
    if seconds <= FIRST_CLAUSE_BUDGET_S:
        return LLMChoice(QUALITY_MODEL, f"{speeds} {budget}")
    return LLMChoice(FAST_MODEL, f"{speeds}, too slow {budget}")


def speed_key(kernels: str, threads: int) -> str:
    """The 1.5B's entry in the speed memory (`llama_speed.speed_key`)."""
    return llama_speed.speed_key(QUALITY_MODEL, kernels, threads)


def remembered(cache_dir: Path, kernels: str) -> list[tuple[int, LLMChoice]]:
    """What `auto` chose on this CPU at each thread count a server gives the LLM (every core when
    the agent runs alone, one fewer beside other services), from the best speeds remembered."""
    memory = SpeedMemory(Path(cache_dir).expanduser() / SPEED_MEMORY_FILE)
    out = []
    for threads in sorted({available_cores(), max(1, available_cores() - 1)}):
        sample = memory.recall(speed_key(kernels, threads))
        if sample is not None:
            out.append((threads, choose(sample, quality_installed=True)))
    return out
