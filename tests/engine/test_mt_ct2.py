"""The CTranslate2 seq2seq MT backend's mechanics on tiny Marian models built here.

No seq2seq translation model ships in a package, so the tests build their own: a
SentencePiece-style BPE tokenizer (trained with `tokenizers`, `▁` word starts) and a
2-layer Marian model. One is trained for a few seconds on a toy word-for-word
"translation" (so it ends its output); one keeps random weights and an NLLB-style
vocabulary (language-code tokens). A third carries
what real OPUS-MT folders carry: `source.spm`/`target.spm` trained with `sentencepiece`
and a shared `vocab.json`, loaded as the slow `MarianTokenizer`.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt import ct2_seq2seq
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.ct2_seq2seq import (
    CT2MTEngine,
    LanguageScheme,
    convert_transformers_model,
    create,
    word_attention,
)
from dragoman.errors import ClientError, ConfigError

if TYPE_CHECKING:
    from transformers import (
        MarianMTModel,
        MarianTokenizer,
        PreTrainedTokenizerBase,
        PreTrainedTokenizerFast,
    )

EN = ["red", "green", "blue", "cat", "dog", "house", "tree", "river", "small", "big", "runs", "sleeps"]
DE = ["rot", "grün", "blau", "katze", "hund", "haus", "baum", "fluss", "klein", "groß", "läuft", "schläft"]
LEXICON = dict(zip(EN, DE, strict=True))

SOURCE = ["small", "red", "house", "river", "dog"]
REFERENCE = "klein rot haus fluss hund"


def _bpe_tokenizer(lang_codes: list[str]) -> PreTrainedTokenizerFast:
    """A fast tokenizer with one shared BPE vocabulary, built with `tokenizers`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=60, special_tokens=["</s>", "<unk>", *lang_codes])
    backend.train_from_iterator([" ".join(EN), " ".join(DE)] * 3, trainer)
    # Marian keeps <pad> last: it only starts the decoder, and the converter drops it.
    backend.add_special_tokens([AddedToken("<pad>", special=True)])
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 0)])
    # transformers' tokenizer __init__ is unannotated.
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def _marian_tokenizer(folder: Path) -> MarianTokenizer:
    """The slow `MarianTokenizer` of an OPUS-MT folder, its SentencePiece models trained here.

    Each side gets its own unigram model; `vocab.json` maps the pieces of both to one
    id space with OPUS-MT's layout: `</s>` 0, `<unk>` 1, `<pad>` last.
    """
    import sentencepiece
    from transformers import MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"</s>": 0, "<unk>": 1}
    for name, words in (("source", EN), ("target", DE)):
        rng = random.Random(0)
        lines = [" ".join(rng.sample(words, len(words))) for _ in range(20)]
        proto = io.BytesIO()
        # A soft limit this small leaves some words whole and splits others into pieces.
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=proto,
            model_type="unigram",
            vocab_size=30,
            hard_vocab_limit=False,
            character_coverage=1.0,
            num_threads=1,
            minloglevel=2,
        )
        (folder / f"{name}.spm").write_bytes(proto.getvalue())
        model = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
        for piece_id in range(model.get_piece_size()):
            # <s>/</s>/<unk> of the spm models are not Marian's: its own specials are above.
            if not (model.is_control(piece_id) or model.is_unknown(piece_id)):
                vocab.setdefault(model.id_to_piece(piece_id), len(vocab))
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
    )


def _build(
    folder: Path,
    *,
    lang_codes: list[str],
    train_steps: int,
    tokenizer_kind: Literal["bpe", "sentencepiece"] = "bpe",
) -> Path:
    """A CTranslate2 Marian model with its tokenizer files, converted from transformers."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    tokenizer: PreTrainedTokenizerBase
    if tokenizer_kind == "sentencepiece":
        assert not lang_codes, "the SentencePiece tokenizer is Marian's: no language codes"
        tokenizer = _marian_tokenizer(folder / "spm")
    else:
        tokenizer = _bpe_tokenizer(lang_codes)
    vocab = len(tokenizer)
    config = MarianConfig(
        vocab_size=vocab,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=128,
        pad_token_id=vocab - 1,
        eos_token_id=0,
        decoder_start_token_id=vocab - 1,
        forced_eos_token_id=0,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = MarianMTModel(config)
        rng = random.Random(0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(train_steps):
            words = [[rng.choice(EN) for _ in range(rng.randint(2, 6))] for _ in range(32)]
            batch = tokenizer([" ".join(w) for w in words], padding=True, return_tensors="pt")
            # text_target: Marian encodes the target with target.spm; the BPE one is shared.
            labels = tokenizer(
                text_target=[" ".join(LEXICON[x] for x in w) for w in words],
                padding=True,
                return_tensors="pt",
            ).input_ids
            labels[labels == vocab - 1] = -100
            loss = model(**batch, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        hf = folder / "hf"
        model.save_pretrained(hf)
        tokenizer.save_pretrained(hf)
    finally:
        torch.set_num_threads(threads)
    return convert_transformers_model(hf, folder / "opus-mt-en-de")


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CT2MTEngine]:
    folder = _build(tmp_path_factory.mktemp("marian"), lang_codes=[], train_steps=400)
    engine = CT2MTEngine(folder, compute_type="float32", threads=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def marian_hf(marian: CT2MTEngine) -> tuple[MarianMTModel, PreTrainedTokenizerBase]:
    """The transformers model and tokenizer `marian` was converted from (`_build` keeps them)."""
    import torch
    from transformers import AutoTokenizer, MarianMTModel

    hf = marian.model_dir.parent / "hf"
    # Eager attention: the fused kernels return no attention weights.
    model = MarianMTModel.from_pretrained(hf, attn_implementation="eager")
    with torch.no_grad():
        # CT2 starts Marian's decoder from a zero embedding, not <pad>'s (start_from_zero_embedding).
        # transformers' get_decoder is unannotated.
        model.get_decoder().embed_tokens.weight[model.config.decoder_start_token_id] = 0.0  # type: ignore[no-untyped-call]
    return model, AutoTokenizer.from_pretrained(hf)


@pytest.fixture(scope="module")
def nllb_like(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CT2MTEngine]:
    folder = _build(tmp_path_factory.mktemp("nllb"), lang_codes=["eng_Latn", "deu_Latn"], train_steps=0)
    engine = CT2MTEngine(folder, compute_type="float32", threads=1)
    yield engine
    engine.close()


#: MarianTokenizer recommends sacremoses for a punctuation normalizer the engine never calls.
_NO_SACREMOSES = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module")
def marian_spm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CT2MTEngine]:
    # A few steps suffice: these tests are about the tokenizer path, not the translation.
    folder = _build(
        tmp_path_factory.mktemp("marian_spm"), lang_codes=[], train_steps=30, tokenizer_kind="sentencepiece"
    )
    engine = CT2MTEngine(folder, compute_type="float32", threads=1)
    yield engine
    engine.close()


def _request(**kw: object) -> MTRequest:
    fields: dict[str, object] = {"source_lang": "en", "target_lang": "de", "source_words": SOURCE}
    fields.update(kw)
    return MTRequest(**fields)  # type: ignore[arg-type]


def test_word_attention_sums_each_words_pieces_and_drops_specials() -> None:
    tokens = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]], dtype=np.float32)
    words = word_attention(tokens, [-1, 0, 0, 1], 3)
    np.testing.assert_allclose(words, [[0.5, 0.4, 0.0], [0.25, 0.25, 0.0]], rtol=1e-6)
    with pytest.raises(ValueError):
        word_attention(tokens, [0, 1], 2)


@pytest.mark.engine
def test_source_tokens_map_every_piece_to_its_word(marian: CT2MTEngine) -> None:
    words = ["small", "river,", "sleeps"]
    tokens, word_of = marian.source_tokens(words, "en")
    assert tokens[-1] == "</s>" and word_of[-1] == -1
    # Word-by-word tokenization equals the sentence's, and multi-piece words keep one index.
    assert tokens[:-1] == marian._tokenizer.tokenize("small river, sleeps")
    assert word_of[:-1] == sorted(word_of[:-1]) and set(word_of[:-1]) == {0, 1, 2}
    assert word_of.count(1) >= 2  # "river," splits into several pieces
    for index, word in enumerate(words):
        pieces = [t for t, w in zip(tokens, word_of, strict=True) if w == index]
        assert pieces == marian._tokenizer.tokenize(word)


@pytest.mark.engine
def test_directions_come_from_the_marian_folder_name(marian: CT2MTEngine) -> None:
    assert marian.scheme is LanguageScheme.MARIAN
    assert marian.directions() == ["en-de"]
    with pytest.raises(ClientError) as caught:
        marian.draft(_request(target_lang="it"))
    assert caught.value.code == "unsupported_direction"


@pytest.mark.engine
def test_final_translates_to_the_end(marian: CT2MTEngine) -> None:
    draft = marian.draft(_request(mode=DraftMode.FINAL))
    assert draft.finished
    assert draft.attention is None
    assert marian.decode(draft.token_ids).strip() == REFERENCE


@pytest.mark.engine
def test_partial_is_bounded_and_reports_word_attention(marian: CT2MTEngine) -> None:
    draft = marian.draft(_request(max_new_tokens=4))
    assert len(draft.token_ids) == 4
    assert not draft.finished
    assert draft.attention is not None
    assert draft.attention.shape == (4, len(SOURCE))
    assert (draft.attention >= 0).all()
    assert (draft.attention.sum(axis=1) <= 1.0 + 1e-4).all()
    assert draft.computed_tokens > len(draft.token_ids)


#: CT2 and torch float32 attention agree to ~1e-6; a piece or row shifted by one moves it by >0.1.
_ATTENTION_ATOL = 1e-3


def _pool_words(
    rows: npt.NDArray[np.float32], word: npt.NDArray[np.int64], n_words: int
) -> npt.NDArray[np.float32]:
    return np.stack([rows[:, word == w].sum(axis=1) for w in range(n_words)], axis=1)


@pytest.mark.engine
@pytest.mark.parametrize("prefix", ["", "klein rot"])
def test_attention_is_the_models_cross_attention_per_source_word(
    marian: CT2MTEngine, marian_hf: tuple[MarianMTModel, PreTrainedTokenizerBase], prefix: str
) -> None:
    """Each row is the drafted token's cross-attention, pooled per source word.

    The alignment attention is the mean of the last decoder layer's heads, as
    `convert_transformers_model` stores it. The reference is the same weights in
    transformers, teacher-forced with the draft, not an expected alignment: whether
    a toy model learns a monotonic one depends on the CPU's float kernels.
    """
    import torch

    model, tokenizer = marian_hf
    draft = marian.draft(_request(target_prefix=prefix, max_new_tokens=64))
    assert draft.token_ids and draft.attention is not None
    source = tokenizer(" ".join(SOURCE)).input_ids
    pieces = tokenizer.convert_ids_to_tokens(source)
    # Words from the sentence's own word-start markers, not the engine's per-word tokenization.
    word = np.cumsum([p.startswith("\u2581") for p in pieces]) - 1
    word[[p in tokenizer.all_special_tokens for p in pieces]] = -1
    assert word.max() == len(SOURCE) - 1 and np.bincount(word[word >= 0]).max() >= 2
    forced = tokenizer(text_target=prefix, add_special_tokens=False).input_ids if prefix else []
    decoder_ids = [model.config.decoder_start_token_id, *forced, *draft.token_ids]
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([source]),
            decoder_input_ids=torch.tensor([decoder_ids]),
            output_attentions=True,
        )
    # Row i is the step predicting target token i, the forced prefix's first: keep the draft's.
    rows = out.cross_attentions[-1][0].mean(dim=0).numpy()[len(forced) : len(forced) + len(draft.token_ids)]
    expected = _pool_words(rows, word, len(SOURCE))
    # The reference tells a one-piece shift of the grouping, or of the rows, from the truth.
    assert not np.allclose(_pool_words(rows, np.roll(word, 1), len(SOURCE)), expected, atol=_ATTENTION_ATOL)
    assert len(rows) < 2 or not np.allclose(expected[1:], expected[:-1], atol=_ATTENTION_ATOL)
    assert draft.attention.shape == expected.shape
    np.testing.assert_allclose(draft.attention, expected, rtol=0, atol=_ATTENTION_ATOL)
    for got, want in zip(draft.attention, expected, strict=True):
        top, second = np.sort(want)[-2:][::-1]
        if top - second > 2 * _ATTENTION_ATOL:  # near ties may flip within the tolerance
            assert int(got.argmax()) == int(want.argmax()), (got, want)


@pytest.mark.engine
def test_prefix_is_continued_verbatim(marian: CT2MTEngine) -> None:
    draft = marian.draft(_request(target_prefix="klein rot", max_new_tokens=64))
    continuation = marian.decode(draft.token_ids)
    # The continuation opens a new word, so it keeps its leading space.
    assert continuation.startswith(" haus")
    assert "klein rot" + continuation == REFERENCE
    assert draft.finished
    # That the rows are the drafted tokens' own, after the prefix's, is checked against
    # transformers in test_attention_is_the_models_cross_attention_per_source_word.
    assert draft.attention is not None and draft.attention.shape[0] == len(draft.token_ids)


@pytest.mark.engine
def test_complete_prefix_finishes_without_tokens(marian: CT2MTEngine) -> None:
    draft = marian.draft(_request(target_prefix=REFERENCE, max_new_tokens=8))
    assert draft.token_ids == []
    assert draft.finished
    assert draft.attention is not None and draft.attention.shape == (0, len(SOURCE))


@pytest.mark.engine
def test_decode_keeps_word_boundaries(marian: CT2MTEngine) -> None:
    ids = marian._tokenizer.convert_tokens_to_ids(marian.target_prefix_tokens("rot haus", "de"))
    assert marian.decode(ids) == " rot haus"
    # A piece inside a word continues it with no space.
    assert not marian.decode(ids[1:]).startswith(" ")
    assert marian.decode([]) == ""


@pytest.mark.engine
def test_nllb_language_codes_lead_source_and_target(nllb_like: CT2MTEngine) -> None:
    assert nllb_like.scheme is LanguageScheme.NLLB
    assert nllb_like.directions() == ["de-en", "en-de"]
    tokens, word_of = nllb_like.source_tokens(["red", "dog"], "en")
    assert tokens[0] == "eng_Latn" and word_of[0] == -1
    assert tokens[-1] == "</s>" and word_of[-1] == -1
    assert nllb_like.target_prefix_tokens("", "de") == ["deu_Latn"]
    assert nllb_like.target_prefix_tokens("rot", "deu_Latn")[0] == "deu_Latn"
    draft = nllb_like.draft(_request(source_words=["red", "dog"], max_new_tokens=3))
    # The forced language code is the prefix, not part of the draft.
    assert len(draft.token_ids) == 3
    assert draft.attention is not None and draft.attention.shape == (3, 2)


@pytest.mark.engine
def test_create_reads_the_model_folder_from_settings(marian: CT2MTEngine, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        create(MTSettings(backend="ct2-seq2seq"), tmp_path)
    with pytest.raises(ConfigError):
        create(MTSettings(backend="ct2-seq2seq", model=str(tmp_path / "missing")), tmp_path)
    folder = marian.model_dir
    engine = create(MTSettings(backend="ct2-seq2seq", model=str(folder), directions=["en-de"]), tmp_path)
    try:
        assert engine.directions() == ["en-de"]
        assert engine.name == "ct2"
    finally:
        engine.close()


@pytest.mark.engine
def test_final_is_bounded_by_the_final_budget(marian: CT2MTEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine sizes a FINAL pass itself; the request's max_new_tokens is for PARTIAL.
    monkeypatch.setattr(ct2_seq2seq, "final_token_budget", lambda words, tokens: 2)
    draft = marian.draft(_request(mode=DraftMode.FINAL, max_new_tokens=64))
    assert len(draft.token_ids) == 2
    assert not draft.finished


@_NO_SACREMOSES
@pytest.mark.engine
def test_opus_mt_folder_loads_the_sentencepiece_marian_tokenizer(marian_spm: CT2MTEngine) -> None:
    from transformers import MarianTokenizer

    folder = marian_spm.model_dir
    assert {"source.spm", "target.spm", "vocab.json"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "tokenizer.json").exists()
    assert isinstance(marian_spm._tokenizer, MarianTokenizer)
    assert marian_spm.scheme is LanguageScheme.MARIAN
    assert marian_spm.directions() == ["en-de"]
    tokens, word_of = marian_spm.source_tokens(SOURCE, "en")
    assert tokens[-1] == "</s>" and word_of[-1] == -1
    assert tokens[:-1] == marian_spm._tokenizer.tokenize(" ".join(SOURCE))
    for index, word in enumerate(SOURCE):
        pieces = [t for t, w in zip(tokens, word_of, strict=True) if w == index]
        assert pieces == marian_spm._tokenizer.tokenize(word)
    # The toy source.spm splits some words: the mapping is checked on multi-piece words too.
    assert max(word_of.count(index) for index in range(len(SOURCE))) >= 2


@_NO_SACREMOSES
@pytest.mark.engine
def test_opus_mt_partial_maps_every_source_piece_to_its_word(marian_spm: CT2MTEngine) -> None:
    draft = marian_spm.draft(_request(max_new_tokens=4))
    assert 0 < len(draft.token_ids) <= 4
    assert draft.attention is not None
    assert draft.attention.shape == (len(draft.token_ids), len(SOURCE))
    # Columns were summed per word (only </s> is dropped): rows stay distributions at most.
    tokens, _ = marian_spm.source_tokens(SOURCE, "en")
    assert (draft.attention >= 0).all()
    assert (draft.attention.sum(axis=1) <= 1.0 + 1e-4).all()
    assert draft.computed_tokens >= len(tokens) + len(draft.token_ids)


@_NO_SACREMOSES
@pytest.mark.engine
def test_opus_mt_final_decodes_to_text(marian_spm: CT2MTEngine) -> None:
    draft = marian_spm.draft(_request(mode=DraftMode.FINAL))
    assert draft.token_ids and draft.attention is None
    text = marian_spm.decode(draft.token_ids)
    assert text.strip()
    # target.spm decoded the pieces: no word-start markers or special tokens are left.
    assert "\u2581" not in text
    assert not any(special in text for special in ("</s>", "<unk>", "<pad>"))
