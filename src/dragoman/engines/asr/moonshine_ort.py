"""Moonshine base-en on plain onnxruntime: an English ASR backend whose encoder reads
only the audio it is given.

The model files come from the `moonshine-cpp` package (`encoder_model.ort`,
`decoder_model_merged.ort`, `tokenizer.bin`), but its own `libmoonshine.so` is never
loaded: it is built for AVX-512 and dies with "Illegal instruction" on AVX2-only CPUs,
while onnxruntime picks its kernels for the CPU it runs on. The package is therefore
never imported either (its `__init__` loads the library); the files are found by the
weights registry. They are re-saved as ONNX at load so that onnxruntime folds their
weight dequantisation once (`_as_onnx`), rather than on every decoder pass.

Moonshine's encoder takes raw 16 kHz samples and has no fixed window: its cost
follows the audio's length (about 41 frames a second), where Whisper pads to a grid
window. The merged decoder is run greedily with its KV cache: one pass over
`<s>` and the forced prefix's tokens fills the self-attention cache and computes the
cross-attention keys and values once; every later token is one cached step.

The forced prefix follows `<s>` in the decoder input (`PrefixMode.DECODER_PROMPT`).
Moonshine has no task tokens, no language token and no previous-text prompt, so a
request's `prompt` is not used, and it has no alignment heads, so `word_times`
gets no word starts.

Trailing quiet is cut to `_QUIET_KEPT_SECONDS` before the encoder: Moonshine sometimes ends
at once, on its first token, when speech is followed by more than about half a second of it.
espeak-ng's "At what temperature in Celsius does water boil at sea level?" decoded to the whole
sentence with 0.3 s of silence after it and to "" with 0.6 s or more, of zeros or of faint noise,
so a voice agent's turn (which ends after server_vad's 500 ms of silence) got no transcript and
no answer. Whisper is not affected, and the words cannot change: the cut audio is quiet.

Guards against a decoder that does not stop: a length limit proportional to the audio
(`_MAX_TOKENS_PER_SECOND`), and the repetition-loop cut Whisper uses (`repetition`); against
one that starts the window over after its forced prefix: the second reading of the prefix is
dropped (`repetition.reread_length`); and against one that goes on past what it heard by
reading a stretch of the window again, which Whisper's echo cut ends (`repetition.echo_start`):
forced " To the north and within easy reach is the rom" on the first 4.6 s of a FLEURS clip, it
said "antic and fascinating town of sintra" and then " and within easy reach is the romantic
and fascinating town of sintra and within", and the next steps, forced to that, kept the
stretch twice in the transcript and its translation (steps that come late under load, at audio
lengths off the 0.8 s grid: 11 of 100 replays of FLEURS clips with random delays before the cut,
0 after; tests/engine/test_interpreter_late_steps.py).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.audio.levels import frame_levels
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.config import ASRSettings
from dragoman.cpu import available_cores
from dragoman.engines.asr.base import (
    ASRCapabilities,
    ASREngine,
    PrefixMode,
    StepRequest,
    StepResult,
    call_layout,
)
from dragoman.engines.asr.moonshine_tokenizer import BOS, EOS, MoonshineTokenizer
from dragoman.engines.info import EngineInfo
from dragoman.engines.repetition import echo_start, loop_start, reread_length
from dragoman.errors import ClientError, ModelUnavailable, RequestRejected
from dragoman.logs import get_logger

log = get_logger(__name__)

#: The packaged model this backend serves when the settings name no Moonshine model.
DEFAULT_MODEL = "moonshine-base-en"
#: Longest audio per request. Moonshine was trained on segments of up to about 30 s
#: and its accuracy drops on longer ones; the item cap follows this.
MAX_AUDIO_SECONDS = 30.0
#: The shortest input the encoder's convolutions take (its output length formula is
#: positive from about 0.05 s); shorter audio is padded with silence to it.
_MIN_SAMPLES = SAMPLE_RATE // 10
#: The length bound, as in Moonshine's own reference decoder (about 6 tokens per second of
#: audio): fast English speech is 3-4 tokens a second with this vocabulary, so a
#: decoder caught in a loop stops after a few dozen tokens.
_MAX_TOKENS_PER_SECOND = 6.5
_SLACK_TOKENS = 8
#: Quiet after the last sound kept before the encoder (`_trim_trailing_quiet`), and what counts
#: as sound: 20 ms frames within this much of the loudest frame of the request, and this far
#: above its noise floor (its 10th-percentile frame).
_QUIET_KEPT_SECONDS = 0.3
_QUIET_BELOW_PEAK_DB = 40.0
_SOUND_ABOVE_FLOOR_DB = 12.0
_CLAUSE_ENDS = tuple(".,!?;:")


def _options(ort: Any, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


def _as_onnx(path: Path) -> bytes:
    """The ORT-format model at `path` as an ONNX model, serialised.

    The packaged files keep their weights as 8-bit integers and dequantise them in the
    graph (Cast, Mul, Add), and onnxruntime does not constant-fold an ORT-format model:
    every decoder step dequantised and transposed the 32,768 x 416 embedding again, 0.15 s
    a token. Saved as ONNX (onnxruntime writes any model it loads) and loaded from that,
    the chains fold once at load, and a step costs about 15 ms.
    """
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="dragoman-moonshine-") as tmp:
        out = Path(tmp) / (path.stem + ".onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.optimized_model_filepath = str(out)
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        model = onnx.load(str(out))
    # The ORT format drops subgraph names (the merged decoder's `If` branches), which ONNX requires.
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH and not attribute.g.name:
                attribute.g.name = f"{node.name}_{attribute.name}"
    data: bytes = model.SerializeToString()
    return data


def _trim_trailing_quiet(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`audio` with at most `_QUIET_KEPT_SECONDS` of the quiet after its last sound (a view)."""
    levels, frame = frame_levels(audio, SAMPLE_RATE)
    if not len(levels):
        return audio
    floor = float(np.percentile(levels, 10))
    sounding = np.flatnonzero(
        levels >= max(levels.max() - _QUIET_BELOW_PEAK_DB, floor + _SOUND_ABOVE_FLOOR_DB)
    )
    if not len(sounding):
        return audio  # all of it one level: nothing stands out as the end of a sound
    end = (int(sounding[-1]) + 1) * frame + round(_QUIET_KEPT_SECONDS * SAMPLE_RATE)
    return audio[:end] if end < len(audio) else audio


@dataclass(frozen=True)
class _Decoded:
    ids: list[int]
    avg_logprob: float | None


class MoonshineEngine(ASREngine):
    """Moonshine (base-en) on onnxruntime's CPU provider."""

    def __init__(
        self, model_path: Path, *, name: str | None = None, threads: int = 0, parallel_calls: int = 1
    ) -> None:
        """`threads`: the encoder's per call; `parallel_calls` calls may run at once (an
        onnxruntime session runs concurrent calls), each decoding on one thread."""
        import onnxruntime as ort

        folder = Path(model_path)
        needed = ("encoder_model.ort", "decoder_model_merged.ort", "tokenizer.bin")
        for file in needed:
            if not (folder / file).is_file():
                raise ModelUnavailable(f"{folder} is not a Moonshine model folder: {file} is missing")
        providers = ["CPUExecutionProvider"]
        try:
            self._encoder = ort.InferenceSession(
                _as_onnx(folder / needed[0]), _options(ort, threads), providers=providers
            )
            # One thread for the decoder: its passes are one token's small products, where a
            # second thread costs more in hand-offs than it saves (on a busy 2-core machine,
            # 20 passes took 1.2 s on one thread against 2.6 s on two, alone or batched by 4).
            self._decoder = ort.InferenceSession(
                _as_onnx(folder / needed[1]), _options(ort, 1), providers=providers
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors on a bad file
            raise ModelUnavailable(f"cannot load the Moonshine model in {folder}: {exc}") from exc
        self.tokenizer = MoonshineTokenizer(folder / needed[2])
        # The cache's inputs and outputs by layer: past_key_values.N.{decoder,encoder}.{key,value}.
        self._past = [i.name for i in self._decoder.get_inputs() if i.name.startswith("past_key_values.")]
        self._present = [o.name for o in self._decoder.get_outputs() if o.name.startswith("present.")]
        shape = next(i.shape for i in self._decoder.get_inputs() if i.name == self._past[0])
        self._heads, self._head_dim = int(shape[1]), int(shape[3])
        self._vocab = min(self.tokenizer.vocab_size, 32_768)
        self.path = folder
        self.name = name or folder.name
        #: Work done so far (encoder output frames, decoder passes), for benchmarks and tests:
        #: what a step costs, counted rather than timed.
        self.encoded_frames = 0
        self.decoder_passes = 0
        self._counting = threading.Lock()  # calls may run side by side
        self.capabilities = ASRCapabilities(
            max_audio_seconds=MAX_AUDIO_SECONDS,
            languages=frozenset({"en"}),
            prefix_mode=PrefixMode.DECODER_PROMPT,
            parallel_calls=max(1, parallel_calls),
        )
        self._info = EngineInfo(
            name=self.name,
            backend="moonshine-ort",
            device="cpu",
            compute_type="float32",
            compute_reason="the files' int8 weights, dequantised to float32 at load",
        )
        log.info(
            "moonshine model loaded",
            path=str(folder),
            encoder_threads=threads,
            decoder_threads=1,
            parallel_calls=max(1, parallel_calls),
        )

    # -- the ASREngine interface ------------------------------------------------------

    def describe(self) -> EngineInfo:
        return self._info

    def batch_key(self, request: StepRequest) -> Hashable:
        return None

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        # Neither the encoder nor the decoder takes an attention mask, so padding would
        # change a hypothesis: requests share a pass only when their audio and forced
        # prefix have the same lengths, and each request gets what it would get alone.
        # Sharing pays in the decoder (4 equal 5 s requests: 20 passes in 0.44 s batched
        # against 1.2 s one by one); the encoder costs the same either way.
        results: list[StepResult | ClientError | None] = [None] * len(requests)
        groups: dict[tuple[int, int], list[tuple[int, list[int]]]] = {}
        heard: dict[int, npt.NDArray[np.float32]] = {}
        for slot, request in enumerate(requests):
            try:
                prefix_ids = self._check(request)
            except ClientError as exc:
                results[slot] = exc
                continue
            heard[slot] = _trim_trailing_quiet(request.audio)
            groups.setdefault((heard[slot].shape[0], len(prefix_ids)), []).append((slot, prefix_ids))
        for members in groups.values():
            audio = np.stack([heard[slot] for slot, _ in members]).astype(np.float32, copy=False)
            decoded = self._transcribe(audio, [ids for _, ids in members])
            for (slot, _), one in zip(members, decoded, strict=True):
                text = requests[slot].prefix + self.tokenizer.decode(one.ids)
                results[slot] = StepResult(text=text, language="en", avg_logprob=one.avg_logprob)
        done: list[StepResult | ClientError] = []
        for result in results:
            assert result is not None  # every slot got a result or its refusal above
            done.append(result)
        return done

    # -- internals --------------------------------------------------------------------

    def _check(self, request: StepRequest) -> list[int]:
        """The request's forced-prefix tokens, or a refusal."""
        audio = request.audio
        if audio.ndim != 1:
            raise RequestRejected("audio must be mono", param="audio")
        if audio.shape[0] > MAX_AUDIO_SECONDS * SAMPLE_RATE:
            raise RequestRejected(
                f"the audio is {audio.shape[0] / SAMPLE_RATE:.1f} s long; "
                f"this model takes at most {MAX_AUDIO_SECONDS:.0f} s per request",
                param="audio",
            )
        language = request.language.strip().lower() if request.language else None
        if language is not None and language != "en":
            raise RequestRejected(
                f"language {language!r} is not supported: this model transcribes English ('en') only",
                param="language",
            )
        if not request.prefix:
            return []
        # The model writes a word-boundary mark before its first word, as before every other.
        prefix = request.prefix if request.prefix.startswith(" ") else " " + request.prefix
        return self.tokenizer.encode(prefix)

    def _transcribe(self, audio: npt.NDArray[np.float32], prefixes: list[list[int]]) -> list[_Decoded]:
        """Greedy decodes of `audio` [batch, samples], each row after its forced prefix
        (all of one length)."""
        rows, length = audio.shape
        samples = np.zeros((rows, max(_MIN_SAMPLES, length)), dtype=np.float32)
        samples[:, :length] = audio
        hidden = self._encoder.run(None, {"input_values": samples})[0]
        with self._counting:
            self.encoded_frames += int(hidden.shape[0] * hidden.shape[1])
        n = len(prefixes[0])
        limit = max(n + _SLACK_TOKENS, int(_MAX_TOKENS_PER_SECOND * length / SAMPLE_RATE) + _SLACK_TOKENS)
        empty = np.zeros((rows, self._heads, 0, self._head_dim), dtype=np.float32)
        feed: dict[str, Any] = {name: empty for name in self._past}
        feed["encoder_hidden_states"] = hidden
        feed["input_ids"] = np.asarray([[BOS, *ids] for ids in prefixes], dtype=np.int64)
        feed["use_cache_branch"] = np.asarray([False])
        new: list[list[int]] = [[] for _ in range(rows)]
        logprob = np.zeros(rows)
        running = np.ones(rows, dtype=bool)
        steps = 0
        while n + steps < limit and running.any():
            steps += 1
            logits, *present = self._decoder.run(["logits", *self._present], feed)
            with self._counting:
                self.decoder_passes += 1
            scores = logits[:, -1, : self._vocab].astype(np.float64)
            tokens = scores.argmax(axis=1)
            # A finished row keeps decoding (the batch moves together); its tokens are dropped.
            running &= tokens != EOS
            picked = scores[np.arange(rows), tokens] - np.logaddexp.reduce(scores, axis=1)
            logprob += np.where(running, picked, 0.0)
            for row in np.flatnonzero(running).tolist():
                new[row].append(int(tokens[row]))
            for past, value in zip(self._past, present, strict=True):
                # The cross-attention keys and values are computed on the first pass only.
                if ".decoder." in past or not feed["use_cache_branch"][0]:
                    feed[past] = value
            feed["input_ids"] = tokens.astype(np.int64)[:, None]
            feed["use_cache_branch"] = np.asarray([True])
        out: list[_Decoded] = []
        for row, prefix_ids in enumerate(prefixes):
            ids = new[row]
            at_limit = bool(running[row])
            cut = loop_start([*prefix_ids, *ids], n, at_limit=at_limit, clause_end=self._clause_end)
            kept = ids if cut is None else ids[: cut - n]
            kept = kept[reread_length(prefix_ids, kept) :]
            echo = echo_start([*prefix_ids, *kept], n, ())
            if echo is not None:
                kept = kept[: echo - n]
            out.append(_Decoded(kept, float(logprob[row]) / len(ids) if ids else None))
        return out

    def _clause_end(self, token_id: int) -> bool:
        return self.tokenizer.decode([token_id]).endswith(_CLAUSE_ENDS)


def create(settings: ASRSettings, cache_dir: Path) -> ASREngine:
    """The registry's factory: `settings.model` is a packaged Moonshine model or a folder of
    Moonshine files. A packaged model of another kind (the Whisper default that
    `--asr-backend moonshine` leaves in place) means `moonshine-base-en`."""
    from dragoman.weights import resolve
    from dragoman.weights.registry import MODELS

    model = settings.model
    spec = MODELS.get(model)
    if spec is not None and not spec.files[0].name.endswith(".ort"):
        log.info("the moonshine backend serves its own model", asked=model, serving=DEFAULT_MODEL)
        model = DEFAULT_MODEL
    path = resolve(model, cache_dir, role="asr")
    name = model if not Path(model).expanduser().exists() else None
    calls, threads = call_layout(settings.threads or available_cores(), settings.parallel_calls)
    return MoonshineEngine(path, name=name, threads=threads, parallel_calls=calls)
