"""Seq2seq MT backend: a user's Marian/OPUS-MT, NLLB or M2M-100 model in CTranslate2 format.

No encoder-decoder translation model ships in a package, so this backend is for
deployments that bring their own weights: convert with `ct2-transformers-converter
--model ... --copy_files <tokenizer files>` so that the folder holds both `model.bin`
and what `transformers.AutoTokenizer` needs (Marian's `source.spm`/`target.spm`/
`vocab.json` load as the slow `MarianTokenizer` through the `sentencepiece`
dependency; NLLB and M2M ship a `tokenizer.json`).

Attention comes from `Translator.translate_batch(return_attention=True)`: one
target x source-token matrix per hypothesis, from the alignment layer and heads
stored in the model spec. The stock converter keeps only the last layer's first
head, which need not align at all; `convert_transformers_model` below stores the
average of all heads of the last layer instead, as AlignAtt without calibrated heads
(real Marian/NLLB models are unchecked; the engine tests check that the reported
matrix is that average, word by word). The matrix is summed over each word's
subword tokens; special tokens (language codes, `</s>`) carry no word and their
mass is dropped, so rows need not sum to one.

The model has no prompt: `context_text` and `history` are ignored, and nothing is
cached between calls (`cache_key` is unused); every call re-encodes the source.
Drafts run to `max_new_tokens` (no early stop at the frontier).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.config import MTSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.mt.base import (
    DraftMode,
    MTCapabilities,
    MTDraft,
    MTEngine,
    MTRequest,
    final_token_budget,
    nothing_drafted,
)
from dragoman.errors import ClientError, ConfigError, EngineFailure, ModelUnavailable

#: SentencePiece's word-start marker: a token beginning with it opens a new word.
_WORD_START = "\u2581"

#: The end-of-utterance pass searches wider than the greedy streaming drafts.
FINAL_BEAM_SIZE = 4
#: Longest target, forced prefix included, any call may produce: Marian models have 512 positions.
MAX_DECODING_LENGTH = 512

#: ISO 639-1 codes to NLLB-200 (FLORES-200) codes, for the languages users ask for most.
NLLB_CODES = {
    "ar": "arb_Arab",
    "cs": "ces_Latn",
    "de": "deu_Latn",
    "en": "eng_Latn",
    "es": "spa_Latn",
    "fr": "fra_Latn",
    "hi": "hin_Deva",
    "it": "ita_Latn",
    "ja": "jpn_Jpan",
    "ko": "kor_Hang",
    "nl": "nld_Latn",
    "pl": "pol_Latn",
    "pt": "por_Latn",
    "ru": "rus_Cyrl",
    "tr": "tur_Latn",
    "uk": "ukr_Cyrl",
    "zh": "zho_Hans",
}

_MARIAN_PAIR = re.compile(r"(?:^|[-_])([a-z]{2,3})-([a-z]{2,3})$")


class LanguageScheme(StrEnum):
    #: One model per direction; no language tokens (Marian/OPUS-MT).
    MARIAN = "marian"
    #: `eng_Latn ... </s>` source, `deu_Latn` forced as the first target token (NLLB-200).
    NLLB = "nllb"
    #: `__en__ ... </s>` source, `__de__` forced first (M2M-100).
    M2M = "m2m"


def word_attention(
    token_attention: npt.NDArray[np.float32], word_of: Sequence[int], n_words: int
) -> npt.NDArray[np.float32]:
    """Sum attention columns over each word's tokens; columns with word -1 are dropped.

    `token_attention` is [target, source tokens]; the result is [target, n_words].
    """
    if token_attention.shape[1] != len(word_of):
        raise ValueError(f"{token_attention.shape[1]} attention columns for {len(word_of)} source tokens")
    membership = np.zeros((len(word_of), n_words), dtype=np.float32)
    for column, word in enumerate(word_of):
        if word >= 0:
            membership[column, word] = 1.0
    return (token_attention.astype(np.float32) @ membership).astype(np.float32)


class CT2MTEngine(MTEngine):
    """Drafts with a CTranslate2 `Translator`; greedy with attention (PARTIAL), beam search (FINAL)."""

    name = "ct2"
    capabilities = MTCapabilities(attention=True, prompt_context=False, kv_reuse=False, frontier_stop=False)

    def __init__(
        self,
        model_dir: Path,
        *,
        directions: Sequence[str] = (),
        device: str = "cpu",
        compute_type: str = "int8",
        threads: int = 0,
    ) -> None:
        # Imported here: the registry imports a backend only when it is chosen.
        import ctranslate2
        from transformers import AutoTokenizer

        if not (model_dir / "model.bin").is_file():
            raise ConfigError(f"{model_dir} is not a CTranslate2 model folder (no model.bin)")
        self.model_dir = model_dir
        try:
            self._translator = ctranslate2.Translator(
                str(model_dir), device=device, compute_type=compute_type, intra_threads=threads
            )
            self._tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        except (OSError, RuntimeError, ValueError, ImportError) as exc:
            raise ModelUnavailable(f"cannot load the CTranslate2 MT model in {model_dir}: {exc}") from exc
        self._info = EngineInfo(
            name=self.name,
            backend="ct2-seq2seq",
            device=device,
            compute_type=str(self._translator.compute_type),
            compute_reason="requested" if compute_type != "auto" else "CTranslate2's choice for this CPU",
        )
        self._eos: str = self._tokenizer.eos_token or "</s>"
        self._specials = frozenset(self._tokenizer.all_special_tokens)
        self.scheme = self._detect_scheme()
        self._directions = sorted(set(directions)) or self._default_directions(model_dir)

    def describe(self) -> EngineInfo:
        return self._info

    # -- languages ---------------------------------------------------------------------

    def _in_vocab(self, token: str) -> bool:
        token_id = self._tokenizer.convert_tokens_to_ids(token)
        return token_id is not None and token_id != self._tokenizer.unk_token_id

    def _detect_scheme(self) -> LanguageScheme:
        if self._in_vocab("eng_Latn"):
            return LanguageScheme.NLLB
        if self._in_vocab("__en__"):
            return LanguageScheme.M2M
        return LanguageScheme.MARIAN

    def language_token(self, lang: str) -> str | None:
        """The model's token for `lang` (an ISO code, or already a model code); None for Marian."""
        if self.scheme is LanguageScheme.MARIAN:
            return None
        if self.scheme is LanguageScheme.NLLB:
            token = lang if self._in_vocab(lang) else NLLB_CODES.get(lang, "")
        else:
            token = f"__{lang}__"
        if not self._in_vocab(token):
            raise ClientError(f"The model has no language code for {lang!r}.", code="unsupported_direction")
        return token

    def _default_directions(self, model_dir: Path) -> list[str]:
        if self.scheme is LanguageScheme.MARIAN:
            match = _MARIAN_PAIR.search(model_dir.resolve().name.lower())
            if match is None:
                raise ConfigError(
                    "cannot tell the direction of a Marian model from its folder name; "
                    "set mt.directions, e.g. ['en-de']"
                )
            return [f"{match.group(1)}-{match.group(2)}"]
        known = []
        for lang in NLLB_CODES:
            token = NLLB_CODES[lang] if self.scheme is LanguageScheme.NLLB else f"__{lang}__"
            if self._in_vocab(token):
                known.append(lang)
        return sorted(f"{a}-{b}" for a in known for b in known if a != b)

    def directions(self) -> list[str]:
        return list(self._directions)

    # -- tokens ------------------------------------------------------------------------

    def source_tokens(self, words: Sequence[str], source_lang: str) -> tuple[list[str], list[int]]:
        """The CT2 source tokens and, for each, the index of its source word (-1: special).

        Words are tokenized one at a time: SentencePiece never merges pieces across
        whitespace, so this equals tokenizing the joined sentence and gives the
        word of every piece without offset bookkeeping (slow tokenizers have none).
        """
        tokens: list[str] = []
        word_of: list[int] = []
        lead = self.language_token(source_lang)
        if lead is not None:
            tokens.append(lead)
            word_of.append(-1)
        for index, word in enumerate(words):
            pieces = self._tokenizer.tokenize(word.strip()) if word.strip() else []
            tokens.extend(pieces)
            word_of.extend([index] * len(pieces))
        tokens.append(self._eos)
        word_of.append(-1)
        return tokens, word_of

    def target_prefix_tokens(self, text: str, target_lang: str) -> list[str]:
        """Tokens forced at the start of the target: the language code, then the accepted text."""
        tokens: list[str] = []
        lead = self.language_token(target_lang)
        if lead is not None:
            tokens.append(lead)
        if text.strip():
            # text_target selects Marian's target SentencePiece model; others share one.
            ids = self._tokenizer(text_target=text.strip(), add_special_tokens=False)["input_ids"]
            tokens.extend(self._tokenizer.convert_ids_to_tokens(ids))
        return tokens

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of drafted tokens as a continuation: a word-initial first token keeps its space.

        SentencePiece decoding drops the leading space of the first piece; the policy
        reads word boundaries from that space, and the accepted text needs it when a
        draft continues a prefix with a new word.
        """
        pieces = [
            piece
            for piece in self._tokenizer.convert_ids_to_tokens(list(token_ids))
            if piece not in self._specials
        ]
        if not pieces:
            return ""
        text: str = self._tokenizer.convert_tokens_to_string(pieces)
        if pieces[0].startswith(_WORD_START) and not text[:1].isspace():
            text = " " + text
        return text

    # -- drafting ----------------------------------------------------------------------

    def draft(self, request: MTRequest) -> MTDraft:
        if request.mode is DraftMode.PREFILL:
            return nothing_drafted()  # no prompt: nothing comes before the source
        direction = f"{request.source_lang}-{request.target_lang}"
        if direction not in self._directions:
            raise ClientError(f"Unsupported direction {direction}.", code="unsupported_direction")
        n_words = len(request.source_words)
        final = request.mode is DraftMode.FINAL
        if n_words == 0:
            empty = None if final else np.zeros((0, 0), dtype=np.float32)
            return MTDraft(token_ids=[], attention=empty, finished=True)
        source, word_of = self.source_tokens(request.source_words, request.source_lang)
        prefix = self.target_prefix_tokens(request.target_prefix, request.target_lang)
        if final:
            budget = final_token_budget(n_words, sum(word >= 0 for word in word_of))
        else:
            budget = request.max_new_tokens
        # CT2 counts the forced prefix in max_decoding_length and returns it in the hypothesis.
        limit = min(len(prefix) + budget, MAX_DECODING_LENGTH)
        started = time.perf_counter()
        try:
            result = self._translator.translate_batch(
                [source],
                target_prefix=[prefix] if prefix else None,
                beam_size=FINAL_BEAM_SIZE if final else 1,
                max_decoding_length=limit,
                return_attention=not final,
                return_end_token=True,
            )[0]
        except (RuntimeError, ValueError) as exc:
            raise EngineFailure(f"CTranslate2 translate_batch failed: {exc}") from exc
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        hypothesis: list[str] = list(result.hypotheses[0])
        drafted = hypothesis[len(prefix) :]
        finished = bool(drafted) and drafted[-1] == self._eos
        if finished:
            drafted = drafted[:-1]
        attention: npt.NDArray[np.float32] | None = None
        if not final:
            rows = np.asarray(result.attention[0], dtype=np.float32).reshape(len(hypothesis), len(source))
            attention = word_attention(rows[len(prefix) : len(prefix) + len(drafted)], word_of, n_words)
        return MTDraft(
            token_ids=[int(i) for i in self._tokenizer.convert_tokens_to_ids(drafted)],
            attention=attention,
            finished=finished,
            # No cache: the encoder reads the whole source and the decoder re-reads the prefix.
            computed_tokens=len(source) + len(hypothesis),
            extra={"engine_ms": elapsed_ms},
        )

    def close(self) -> None:
        self._translator.unload_model()


#: Tokenizer files a converted folder needs, copied when the source model has them.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentencepiece.bpe.model",
    "source.spm",
    "target.spm",
    "vocab.json",
)


def convert_transformers_model(
    model: Path,
    output_dir: Path,
    *,
    alignment_layer: int = -1,
    alignment_heads: int = 0,
    quantization: str | None = None,
) -> Path:
    """Convert a local transformers seq2seq folder to CTranslate2, tokenizer files included.

    `alignment_heads` heads of decoder layer `alignment_layer` are averaged into the
    returned attention; 0 means all of them.
    """
    from ctranslate2.converters import TransformersConverter
    from ctranslate2.specs import ModelSpec

    class _Converter(TransformersConverter):  # type: ignore[misc]
        def _load(self) -> ModelSpec:
            spec = super()._load()
            spec.decoder.alignment_layer = np.int16(alignment_layer)
            spec.decoder.alignment_heads = np.int16(alignment_heads)
            return spec

    copy = [name for name in TOKENIZER_FILES if (model / name).is_file()]
    converter = _Converter(str(model), copy_files=copy)
    return Path(converter.convert(str(output_dir), quantization=quantization, force=True))


def create(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """The registry's factory. `cache_dir` is unused: the weights are the user's own.

    Reads `mt.model` (the model folder), `mt.directions` (empty: inferred from the
    model), `mt.device`, `mt.compute_type` and `mt.threads`.
    """
    model = settings.model
    if not model:
        raise ConfigError("the ct2 MT backend needs mt.model: a CTranslate2 model folder")
    model_dir = Path(str(model)).expanduser()
    if not model_dir.is_dir():
        raise ConfigError(f"mt.model {model_dir} is not a folder")
    return CT2MTEngine(
        model_dir,
        directions=list(settings.directions),
        device=settings.device,
        compute_type=settings.compute_type,
        threads=settings.threads,
    )
