"""Whisper on CTranslate2: the ASR backend for re-decode steps.

One `transcribe_batch` call encodes its requests' audio in batches, one per length
bucket (`buckets`: short steps do not pad to long ones), and decodes each batch
together, each request with its own decoder prompt:

    [<|startofprev|> prompt…] <|startoftranscript|> <|xx|> <|transcribe|> <|notimestamps|> prefix…

The stable prefix goes after `<|notimestamps|>`, so the hypothesis starts with
exactly those tokens: CTranslate2's `Whisper.generate` continues the prompt it is given.

Only the audio a request has is encoded, not a window padded to 30 s: the encoder's
cost follows its input length, so a 2 s step costs a 3 s encode (its audio and a second
of silence, on the grid of `buckets`). On a short window Whisper sometimes misses the
end of the text and starts it over ("And so my fellow Americans. And so my fellow
Americans. And so…"). Three guards keep trimmed windows as accurate as the padded one:
a second of silence after the audio, so the decoder sees where speech ends; a length
limit in tokens per second of audio, so a loop stops after a few dozen tokens; and the
loop itself, which shows as a periodic tail of the tokens, is cut after its first copy
(`repetition`), as is a continuation that copies eight tokens in a row of the
previous-text prompt or of itself. A decode that still looks like a loop (Whisper's
compression-ratio test, or the length limit without a periodic tail) is decoded again
over the full 30 s window. What each decode's hypothesis goes through is in
`whisper_hypothesis`; the tokenizer is `whisper_tokenizer`'s, the log-mel features and
encoder calls `whisper_encoder`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.config import ASRSettings, ChineseScript
from dragoman.cpu import available_cores
from dragoman.engines.asr.base import (
    ASRCapabilities,
    ASREngine,
    PrefixMode,
    StepRequest,
    StepResult,
    call_layout,
)
from dragoman.engines.asr.buckets import grid_window, length_buckets
from dragoman.engines.asr.chinese_script import write
from dragoman.engines.asr.whisper_encoder import HOP, encode, log_mel, read_n_mels
from dragoman.engines.asr.whisper_hypothesis import DecodeItem, length_budget, take_hypothesis, word_starts
from dragoman.engines.asr.whisper_tokenizer import WhisperTokenizer
from dragoman.engines.info import EngineInfo
from dragoman.errors import ClientError, ModelUnavailable, RequestRejected
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Whisper's input window.
WINDOW_SECONDS = 30.0
_WINDOW_SAMPLES = int(WINDOW_SECONDS * SAMPLE_RATE)
#: Silence after the audio (see the module docstring). There is no floor on the window
#: beyond that: a 10 s floor once stood in for the loop guards, and made every short step
#: pay for 10 s.
TAIL_SECONDS = 1.0
#: What ends a clause, for cutting a repetition loop after a whole one.
_CLAUSE_ENDS = tuple(".,!?;:。，！？、")
#: Whisper's text context: prompt, task tokens and generated tokens together.
MAX_LENGTH = 448
#: openai-whisper keeps the last n_text_ctx // 2 - 1 tokens of a previous-text prompt.
_MAX_PROMPT_TOKENS = MAX_LENGTH // 2 - 1
#: Prompt lengths are rounded down to whole multiples of this many tokens (see `_prepare`).
_PROMPT_GRAIN = 16
#: Room always left for new tokens after the forced prefix.
_MIN_NEW_TOKENS = 32


def likeliest(ranked: Sequence[tuple[str, float]], among: Sequence[str]) -> tuple[str, float]:
    """The likeliest language of Whisper's ranking (`[("<|en|>", p), ...]`, best first) that is
    one of `among` (any, when it is empty or names none of them), with its probability."""
    languages = [(token[2:-2], probability) for token, probability in ranked]
    return next((language for language in languages if language[0] in among), languages[0])


class WhisperCT2Engine(ASREngine):
    def __init__(
        self,
        model_path: Path,
        *,
        name: str | None = None,
        device: str = "cpu",
        compute_type: str = "int8",
        threads: int = 0,
        parallel_calls: int = 1,
        beam_size: int = 1,
        trim: bool = True,
        chinese_script: ChineseScript = "simplified",
    ) -> None:
        """Load a CTranslate2 Whisper folder (model.bin, config.json, tokenizer.json).

        `parallel_calls` calls may run at once, each on `threads` threads (CTranslate2's
        `inter_threads` and `intra_threads`). On a CPU, for the small calls of a live load,
        calls of one thread each serve 1.7-2.5× the steps of one call on two (`call_layout`).

        `trim=False` encodes every request over the full 30 s window, as Whisper was
        trained; it exists for comparison and is about 2-3× slower on short audio.
        Chinese hypotheses are written in `chinese_script` (`engines.asr.chinese_script`).
        """
        import ctranslate2
        from transformers import WhisperFeatureExtractor

        folder = Path(model_path)
        for needed in ("model.bin", "tokenizer.json"):
            if not (folder / needed).is_file():
                raise ModelUnavailable(
                    f"{folder} is not a CTranslate2 Whisper folder: {needed} is missing "
                    "(convert a model with ct2-transformers-converter, copying tokenizer.json)"
                )
        try:
            self._model = ctranslate2.models.Whisper(
                str(folder),
                device=device,
                compute_type=compute_type,
                inter_threads=max(1, parallel_calls),
                intra_threads=threads,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise ModelUnavailable(f"cannot load the Whisper model in {folder}: {exc}") from exc
        self._ct2 = ctranslate2
        #: On a CPU, encoder calls of a bounded batch (`whisper_encoder.encode`; False: one call).
        self.split_encode = device == "cpu"
        self._beam_size = beam_size
        self.chinese_script = chinese_script
        #: Encode only the audio a request has (see the module docstring); False pads to 30 s.
        self.trim = trim
        self.path = folder
        #: What clients see in /v1/models and session events: the packaged name or the folder's.
        self.name = name or folder.name
        self._info = EngineInfo(
            name=self.name,
            backend="whisper-ct2",
            device=device,
            compute_type=str(self._model.compute_type),
            compute_reason="requested" if compute_type != "auto" else "CTranslate2's choice for this CPU",
        )
        self.tokenizer = WhisperTokenizer(folder / "tokenizer.json")
        self._features = WhisperFeatureExtractor(feature_size=read_n_mels(self._model, folder))  # type: ignore[no-untyped-call]
        tok = self.tokenizer
        self._sot = tok.token_id("<|startoftranscript|>")
        self._transcribe = tok.token_id("<|transcribe|>")
        self._no_timestamps = tok.token_id("<|notimestamps|>")
        self._prev = tok.token_id("<|startofprev|>")
        self._eot = tok.token_id("<|endoftext|>")
        self._clause_ends: dict[int, bool] = {}
        self.multilingual = bool(self._model.is_multilingual)
        # The language tokens follow <|startoftranscript|>, one per language the model knows.
        self._lang_ids: dict[str, int] = {}
        if self.multilingual:
            for token_id in range(self._sot + 1, self._sot + 1 + int(self._model.num_languages)):
                token = tok.id_to_token(token_id) or ""
                if token.startswith("<|") and token.endswith("|>"):
                    self._lang_ids[token[2:-2]] = token_id
        languages = frozenset(self._lang_ids) if self.multilingual else frozenset({"en"})
        self.capabilities = ASRCapabilities(
            max_audio_seconds=WINDOW_SECONDS,
            languages=languages,
            prefix_mode=PrefixMode.DECODER_PROMPT,
            parallel_calls=max(1, parallel_calls),
        )
        log.info(
            "whisper model loaded",
            path=str(folder),
            device=device,
            compute_type=compute_type,
            threads=threads,
            parallel_calls=max(1, parallel_calls),
            multilingual=self.multilingual,
            n_mels=self._features.feature_size,
        )

    # -- the ASREngine interface ------------------------------------------------------

    def describe(self) -> EngineInfo:
        return self._info

    def batch_key(self, request: StepRequest) -> Hashable:
        # suppress_blank is one option per generate call, and a forced prefix needs it off
        # (else the model may not stop right after the prefix); prompts, prefixes,
        # languages and detection may all differ within a call.
        return bool(request.prefix)

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        results: list[StepResult | ClientError | None] = [None] * len(requests)
        items: list[DecodeItem] = []
        for slot, request in enumerate(requests):
            try:
                items.append(self._prepare(slot, request))
            except ClientError as exc:
                results[slot] = exc
        if items:
            if self.trim:
                # Short steps are not padded to long ones: one encoder pass per length bucket.
                seconds = [it.request.audio.shape[0] / SAMPLE_RATE + TAIL_SECONDS for it in items]
                for bucket in length_buckets(seconds):
                    self._decode([items[i] for i in bucket], trimmed=True)
            else:
                self._decode(items, trimmed=False)
            if self.trim:
                retry = [it for it in items if it.suspect and it.window < _WINDOW_SAMPLES]
                if retry:
                    log.info("whisper decode looks like a loop; retrying over 30 s", count=len(retry))
                    self._decode(retry, trimmed=False)
            for it in items:
                results[it.slot] = StepResult(
                    text=it.text,
                    language=it.language,
                    language_probability=it.language_probability,
                    words=it.words,
                    avg_logprob=it.avg_logprob,
                    no_speech_prob=it.no_speech_prob,
                )
        done: list[StepResult | ClientError] = []
        for result in results:
            assert result is not None  # every slot got a result or its refusal above
            done.append(result)
        return done

    def close(self) -> None:
        unload = getattr(self._model, "unload_model", None)
        if unload is not None:
            unload()

    # -- internals --------------------------------------------------------------------

    def _prepare(self, slot: int, request: StepRequest) -> DecodeItem:
        audio = request.audio
        if audio.ndim != 1:
            raise RequestRejected("audio must be mono", param="audio")
        if audio.shape[0] > _WINDOW_SAMPLES:
            raise RequestRejected(
                f"the audio is {audio.shape[0] / SAMPLE_RATE:.1f} s long; "
                f"this model takes at most {WINDOW_SECONDS:.0f} s per request",
                param="audio",
            )
        language = request.language.strip().lower() if request.language else None
        if language is not None and language not in self.capabilities.languages:
            if self.multilingual:
                msg = f"language {language!r} is not supported by this model"
            else:
                msg = f"language {language!r} is not supported: this model transcribes English ('en') only"
            raise RequestRejected(msg, param="language")
        if not self.multilingual:
            language = "en"
        prefix_ids = self.tokenizer.encode(request.prefix) if request.prefix else []
        room = MAX_LENGTH - 4 - len(prefix_ids) - _MIN_NEW_TOKENS
        if room < 0:
            raise RequestRejected("the forced prefix is too long for this model", param="prefix")
        prev: list[int] = []
        if request.prompt and request.prompt.strip():
            # As openai-whisper does: a leading space, and the prompt's end is what counts.
            prompt_ids = self.tokenizer.encode(" " + request.prompt.strip())
            keep = min(_MAX_PROMPT_TOKENS, room - 1, len(prompt_ids))  # one more for <|startofprev|>
            # Prompts of different lengths decode in separate calls (see `_decode`): past
            # _PROMPT_GRAIN tokens a prompt keeps a whole number of grains, its last ones, so
            # that steps of long items, whose prompt is their sealed text, decode together.
            if keep > _PROMPT_GRAIN:
                keep -= keep % _PROMPT_GRAIN
            if keep > 0:
                prev = [self._prev, *prompt_ids[-keep:]]
        return DecodeItem(slot, request, prev, prefix_ids, language)

    def _window(self, items: Sequence[DecodeItem], trimmed: bool) -> int:
        if not trimmed:
            return _WINDOW_SAMPLES
        longest = max(int(it.request.audio.shape[0]) for it in items)
        # The grid's windows are whole seconds, so whole multiples of the encoder's GRAIN.
        want = grid_window(longest / SAMPLE_RATE + TAIL_SECONDS)
        return min(_WINDOW_SAMPLES, round(want * SAMPLE_RATE))

    def _decode(self, items: Sequence[DecodeItem], *, trimmed: bool) -> None:
        window = self._window(items, trimmed)
        features = log_mel(self._features, [it.request.audio for it in items], window)
        # CTranslate2 needs <|startoftranscript|> at the same position in every prompt of
        # a generate call, so items whose previous-text prompts differ in length decode
        # in separate calls, all from one encoder pass.
        groups: dict[int, list[int]] = {}
        for index, it in enumerate(items):
            groups.setdefault(len(it.prev), []).append(index)
        encoded = encode(
            self._model, self._ct2, features, window, split=self.split_encode, to_cpu=len(groups) > 1
        )
        if self.multilingual and any(it.language is None for it in items):
            detected = self._model.detect_language(encoded)
            for it, ranked in zip(items, detected, strict=True):
                if it.language is None:
                    it.language, it.language_probability = likeliest(ranked, it.request.detect_among)
        if len(groups) == 1:
            self._generate(items, encoded, window)
            return
        states = np.asarray(encoded)
        for indices in groups.values():
            part = self._ct2.StorageView.from_array(np.ascontiguousarray(states[indices]))
            self._generate([items[i] for i in indices], part, window)

    def _generate(self, items: Sequence[DecodeItem], encoded: Any, window: int) -> None:
        prompts = []
        for it in items:
            prompts.append([*it.prev, *self._task(it), self._no_timestamps, *it.prefix_ids])
        limit = min(MAX_LENGTH, max(length_budget(it, len(p)) for it, p in zip(items, prompts, strict=True)))
        outputs = self._model.generate(
            encoded,
            prompts,
            beam_size=self._beam_size,
            max_length=limit,
            suppress_blank=not any(it.prefix_ids for it in items),
            return_scores=True,
            return_no_speech_prob=True,
        )
        for it, prompt, out in zip(items, prompts, outputs, strict=True):
            take_hypothesis(it, out, len(prompt), limit, window, self._clause_end, self._written(it))
        self._align([i for i, it in enumerate(items) if it.request.word_times and it.ids], items, encoded)

    def _align(self, wanted: list[int], items: Sequence[DecodeItem], encoded: Any) -> None:
        """Word starts from the cross-attention of the alignment heads (CTranslate2's `align`,
        a teacher-forced decoder pass over the hypothesis: no second encoder pass)."""
        tok = self.tokenizer
        assert isinstance(tok, WhisperTokenizer)
        by_task: dict[tuple[int, ...], list[int]] = {}
        for i in wanted:
            by_task.setdefault(tuple(self._task(items[i])), []).append(i)
        states = None
        for task, indices in by_task.items():
            if len(indices) == len(items):
                part = encoded
            else:
                states = np.asarray(encoded) if states is None else states
                part = self._ct2.StorageView.from_array(np.ascontiguousarray(states[indices]))
            group = [items[i] for i in indices]
            frames = [min(it.window, int(it.request.audio.shape[0])) // HOP for it in group]
            aligned = self._model.align(part, list(task), [[*it.ids, self._eot] for it in group], frames)
            for it, result in zip(group, aligned, strict=True):
                it.words = word_starts(it, result.alignments, tok, self._written(it))

    def _written(self, it: DecodeItem) -> Callable[[Sequence[int]], str]:
        """The text of tokens of `it`'s hypothesis, as the engine writes its language."""
        script, language, decode = self.chinese_script, it.language, self.tokenizer.decode
        return lambda ids: write(decode(ids), language, script)

    def _clause_end(self, token_id: int) -> bool:
        ends = self._clause_ends.get(token_id)
        if ends is None:
            ends = self._clause_ends[token_id] = self.tokenizer.decode([token_id]).endswith(_CLAUSE_ENDS)
        return ends

    def _task(self, it: DecodeItem) -> list[int]:
        task = [self._sot]
        if self.multilingual:
            assert it.language is not None
            task += [self._lang_ids[it.language], self._transcribe]
        return task


def create(settings: ASRSettings, cache_dir: Path) -> ASREngine:
    """The registry's factory: `settings.model` is a packaged model name or a local folder."""
    from dragoman.weights import resolve

    path = resolve(settings.model, cache_dir, role="asr")
    name = settings.model if not Path(settings.model).expanduser().exists() else None
    calls, threads = call_layout(
        settings.threads or available_cores(), settings.parallel_calls, cpu=settings.device == "cpu"
    )
    return WhisperCT2Engine(
        path,
        name=name,
        device=settings.device,
        compute_type=settings.compute_type,
        threads=threads,
        parallel_calls=calls,
        beam_size=settings.beam_size,
        chinese_script=settings.chinese_script,
    )
