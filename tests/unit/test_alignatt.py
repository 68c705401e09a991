"""The AlignAtt policy without a model: frontier, commit cuts, the cached-draft fast path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dragoman.streaming.alignatt import (
    AlignAttParams,
    CachedDraft,
    CommitCut,
    DraftText,
    Frontier,
    PromptKey,
    attended_words,
    build_source_accessibility_frontier,
    clean_final_text,
    select_commit,
    unit_boundaries,
)

P0 = AlignAttParams(frontier_margin=0)


class Pieces:
    """Token id i is the UTF-8 byte piece PIECES[i]."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)
        self.ids = list(range(len(pieces)))
        self.calls = 0

    def decode(self, ids: Sequence[int]) -> str:
        self.calls += 1
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


def one_hot(columns: Sequence[int], n_words: int) -> np.ndarray:
    matrix = np.zeros((len(columns), n_words), dtype=np.float32)
    for row, column in enumerate(columns):
        matrix[row, column] = 0.9
        matrix[row, (column + 1) % n_words] += 0.05
    return matrix


def cut_of(
    pieces: Pieces,
    columns: Sequence[int],
    frontier: Frontier,
    *,
    finished: bool = False,
    target: str = "de",
    params: AlignAttParams = P0,
    start: int = 0,
) -> CommitCut:
    texts = DraftText(pieces.ids, pieces.decode)
    positions = attended_words(one_hot(columns, frontier.n_source))
    return select_commit(
        positions, texts, frontier, start=start, finished=finished, target_lang=target, params=params
    )


# -- the frontier ----------------------------------------------------------------


def test_committed_words_are_accessible_and_tail_words_are_not() -> None:
    frontier = build_source_accessibility_frontier(
        [400.0, 900.0, 1300.0], 2, clock_ms=2000.0, final=False, params=P0
    )
    assert frontier == Frontier(n_source=5, accessible=3)


def test_the_margin_holds_the_last_source_positions_unless_final() -> None:
    params = AlignAttParams(frontier_margin=2)
    ends = [100.0, 200.0, 300.0, 400.0]
    assert (
        build_source_accessibility_frontier(ends, 0, clock_ms=500, final=False, params=params).accessible == 2
    )
    # With a tail of 2 words the margin falls on the tail: every committed word stays accessible.
    assert (
        build_source_accessibility_frontier(ends, 2, clock_ms=500, final=False, params=params).accessible == 4
    )
    assert (
        build_source_accessibility_frontier(ends, 1, clock_ms=500, final=True, params=params).accessible == 5
    )
    assert (
        build_source_accessibility_frontier([1.0], 0, clock_ms=5, final=False, params=params).accessible == 0
    )


def test_recent_committed_words_count_as_tail_with_inaccessible_ms() -> None:
    params = AlignAttParams(frontier_margin=0, inaccessible_ms=500)
    ends: list[float | None] = [100.0, None, 1600.0, 1700.0]
    frontier = build_source_accessibility_frontier(ends, 1, clock_ms=2000.0, final=False, params=params)
    # Word 2 ended 400 ms before the clock: it and everything after it are held.
    assert frontier.accessible == 2
    late = build_source_accessibility_frontier(ends, 1, clock_ms=2300.0, final=False, params=params)
    assert late.accessible == 4


# -- commit selection --------------------------------------------------------------


def test_commit_stops_at_the_first_token_attending_to_an_inaccessible_word() -> None:
    pieces = Pieces(b"Hallo", b" Welt,", b" wie", b" geht")
    cut = cut_of(pieces, [0, 2, 1, 3], Frontier(4, 2))
    assert (cut.end, cut.text, cut.covered, cut.reason) == (1, "Hallo", 1, "alignatt:attention_frontier")


def test_a_finished_draft_holds_the_unit_that_closes_it_for_the_final() -> None:
    # Everything accessible and the model ended the translation, but the source is
    # still open: committing "Welt." would close the sentence before the final.
    pieces = Pieces(b"Hallo", b" Welt.")
    cut = cut_of(pieces, [0, 1], Frontier(2, 2), finished=True)
    assert (cut.end, cut.text, cut.covered, cut.reason) == (1, "Hallo", 1, "alignatt:eos")
    # The same for characters: the closing "。" waits.
    zh = Pieces("你好".encode(), "世界".encode(), "。".encode())
    cut = cut_of(zh, [0, 1, 1], Frontier(2, 2), finished=True, target="zh")
    assert (cut.end, cut.text) == (2, "你好世界")


def test_an_unfinished_draft_holds_its_last_word_which_may_continue() -> None:
    pieces = Pieces(b"Hallo", b" Welt")
    cut = cut_of(pieces, [0, 1], Frontier(2, 2), finished=False)
    assert (cut.text, cut.reason) == ("Hallo", "alignatt:max_tokens")


def test_a_word_attending_partly_to_the_tail_is_held_whole() -> None:
    # " Stra" attends to word 1 (accessible), "ße" to word 2 (tail): the word waits.
    pieces = Pieces(b"breite", b" Stra", b"\xc3\x9fe", b" ist")
    cut = cut_of(pieces, [0, 1, 2, 2], Frontier(3, 2))
    assert cut.text == "breite"
    assert cut.end == 1


def test_a_cut_never_ends_inside_a_multibyte_character() -> None:
    # A cut after b"\xe3" decodes to U+FFFD; with a Japanese target every clean
    # character boundary is a unit, so the cut backs off to before the broken byte.
    pieces = Pieces("日".encode(), "の".encode()[:1], "の".encode()[1:], "人".encode())
    texts = DraftText(pieces.ids, pieces.decode)
    assert texts.prefixes[2].endswith("\ufffd")
    assert unit_boundaries(texts, 0, False, "ja") == [1, 3, 4]
    cut = cut_of(pieces, [0, 0, 1, 2], Frontier(3, 1), target="ja")
    assert cut.text == "日"
    cut = cut_of(pieces, [0, 0, 1, 2], Frontier(3, 2), target="ja")
    assert cut.text == "日の"


def test_units_are_words_for_spaced_targets_and_jiebas_words_for_chinese() -> None:
    spaced = Pieces(b"Gr", b"\xc3", b"\xbc\xc3\x9f", b"e", b" Welt")
    texts = DraftText(spaced.ids, spaced.decode)
    assert unit_boundaries(texts, 0, False, "de") == [4]
    assert unit_boundaries(texts, 0, True, "de") == [4, 5]
    # jieba: 美国 | 总统 | 说. A cut between 美 and 国 would split a word; the draft's last
    # word may still grow (说 -> 说明), so it is a unit only when the draft is finished.
    chinese = Pieces(*(char.encode() for char in "美国总统说"))
    texts = DraftText(chinese.ids, chinese.decode)
    assert unit_boundaries(texts, 0, False, "zh-Hans") == [2, 4]
    assert unit_boundaries(texts, 0, True, "zh") == [2, 4, 5]
    assert unit_boundaries(texts, 2, False, "zh") == [4]


def test_a_chinese_commit_never_ends_inside_a_word() -> None:
    # 国 attends to the tail: the character before it is the first of 美国, which waits.
    chinese = Pieces(*(char.encode() for char in "美国总统说"))
    assert cut_of(chinese, [0, 2, 2, 2, 2], Frontier(3, 1), target="zh").text == ""
    assert cut_of(chinese, [0, 0, 0, 2, 2], Frontier(3, 1), target="zh").text == "美国"
    assert cut_of(chinese, [0, 0, 1, 1, 2], Frontier(3, 2), target="zh").text == "美国总统"


def test_hold_back_and_min_emit_units() -> None:
    pieces = Pieces(b"Hallo", b" Welt,", b" wie", b" geht")
    frontier = Frontier(4, 4)
    held = cut_of(
        pieces, [0, 1, 2, 3], frontier, params=AlignAttParams(frontier_margin=0, hold_back_target_units=1)
    )
    assert held.text == "Hallo Welt,"
    waiting = cut_of(
        pieces,
        [0, 1, 2, 3],
        Frontier(4, 2),
        params=AlignAttParams(frontier_margin=0, min_emit_target_units=3),
    )
    assert (waiting.end, waiting.text, waiting.covered) == (0, "", None)
    enough = cut_of(
        pieces,
        [0, 1, 2, 3],
        Frontier(4, 3),
        params=AlignAttParams(frontier_margin=0, min_emit_target_units=3),
    )
    assert enough.text == "Hallo Welt, wie"


def test_unsegmented_targets_hold_back_more_characters() -> None:
    zh = Pieces("美".encode(), "国".encode(), "总统".encode(), "说".encode())
    params = AlignAttParams(frontier_margin=0, unsegmented_hold_back=1)
    # "美国总统" may be committed (word 2 is the frontier); one more character waits.
    assert cut_of(zh, [0, 0, 1, 2], Frontier(3, 2), target="zh", params=params).text == "美国"
    assert cut_of(zh, [0, 0, 1, 2], Frontier(3, 2), target="zh").text == "美国总统"
    # A spaced target is unaffected.
    de = Pieces(b"Der", " Präsident".encode(), b" sagte")
    assert cut_of(de, [0, 1, 2], Frontier(3, 2), params=params).text == "Der Präsident"


def test_a_partial_commit_never_ends_on_an_article() -> None:
    # "a causa della" binds a gender the source has not given yet; the article waits
    # for its noun.
    it = Pieces(b"Tuttavia,", b" a", b" causa", b" della", b" lenta")
    assert cut_of(it, [0, 1, 2, 3, 4], Frontier(5, 4), target="it").text == "Tuttavia, a causa"
    assert cut_of(it, [0, 1, 2, 3, 4], Frontier(5, 5), target="it", finished=True).text == (
        "Tuttavia, a causa"
    )
    de = Pieces(b"Sie", b" wohnt", b" in", b" der", b" Stadt", b" und")
    assert cut_of(de, [0, 1, 2, 3, 4, 5], Frontier(6, 4), target="de").text == "Sie wohnt in"
    assert cut_of(de, [0, 1, 2, 3, 4, 5], Frontier(6, 5), target="de-DE").text == "Sie wohnt in der Stadt"
    en = Pieces(b"It", b" is", b" an", b" apple")
    assert cut_of(en, [0, 1, 2, 3], Frontier(4, 3), target="en").text == "It is"
    # Punctuation closes the phrase; Chinese has no articles; the knob turns it off.
    closed = Pieces(b"Ich", b" sah", b" die,", b" die")
    assert cut_of(closed, [0, 1, 2, 3], Frontier(4, 4), target="de").text == "Ich sah die,"
    assert cut_of(it, [0, 1, 2, 3, 4], Frontier(5, 4), target="zh").end == 4
    off = AlignAttParams(frontier_margin=0, hold_articles=False)
    assert cut_of(it, [0, 1, 2, 3, 4], Frontier(5, 4), target="it", params=off).text == (
        "Tuttavia, a causa della"
    )


def test_an_article_held_from_the_cut_keeps_the_draft_for_the_fast_path() -> None:
    # The held article is released by the re-cut once its noun becomes committable.
    it = Pieces(b"Tuttavia,", b" a", b" causa", b" della", b" rete", b" lenta")
    texts = DraftText(it.ids, it.decode)
    positions = attended_words(one_hot([0, 1, 2, 3, 4, 5], 6))
    first = select_commit(
        positions, texts, Frontier(6, 4), start=0, finished=False, target_lang="it", params=P0
    )
    then = select_commit(
        positions, texts, Frontier(6, 5), start=first.end, finished=False, target_lang="it", params=P0
    )
    assert (first.text, then.text) == ("Tuttavia, a causa", " della rete")


def test_rows_without_attention_stop_the_commit() -> None:
    attention = np.array([[0.0, 1.0], [np.nan, 0.0], [0.2, 0.7]], dtype=np.float32)
    assert attended_words(attention) == [1, -1, 1]
    pieces = Pieces(b"a", b" b", b" c")
    texts = DraftText(pieces.ids, pieces.decode)
    cut = select_commit(
        attended_words(attention), texts, Frontier(2, 2), start=0, finished=True, target_lang="de", params=P0
    )
    assert cut.text == "a"


def test_commit_from_an_offset_keeps_the_leading_space() -> None:
    pieces = Pieces(b"Hallo", b" Welt,", b" wie", b" geht")
    cut = cut_of(pieces, [0, 1, 2, 2], Frontier(3, 3), start=1)
    assert (cut.end, cut.text, cut.covered) == (3, " Welt, wie", 3)


def test_mismatched_attention_rows_are_rejected() -> None:
    pieces = Pieces(b"a", b" b")
    with pytest.raises(ValueError):
        select_commit(
            [0],
            DraftText(pieces.ids, pieces.decode),
            Frontier(1, 1),
            start=0,
            finished=True,
            target_lang="de",
            params=P0,
        )


def test_final_text_loses_a_broken_last_character() -> None:
    assert clean_final_text("Grüß\ufffd") == "Grüß"
    assert clean_final_text("Hallo Welt. ") == "Hallo Welt."


# -- the fast path ---------------------------------------------------------------


def test_a_cached_draft_is_recut_against_a_new_frontier_without_decoding() -> None:
    pieces = Pieces(b"Hallo", b" Welt,", b" wie", b" geht")
    texts = DraftText(pieces.ids, pieces.decode)
    calls = pieces.calls
    positions = tuple(attended_words(one_hot([0, 1, 2, 3], 4)))
    key = PromptKey(("Hello", "world,", "how", "are"), None, (), 16)
    first = select_commit(
        positions, texts, Frontier(4, 1), start=0, finished=True, target_lang="de", params=P0
    )
    cache = CachedDraft(key, positions, texts, True, first.end, first.text)
    assert cache.serves(key, "Hallo")
    assert not cache.serves(key, "Hallo Welt")  # the accepted target moved on some other way
    assert not cache.serves(PromptKey(("Hello", "world,", "how", "are", "you?"), None, (), 16), "Hallo")
    again = cache.recut(Frontier(4, 3), "de", P0)
    assert (again.end, again.text, again.covered) == (3, " Welt, wie", 3)
    assert pieces.calls == calls
    done = cache.advanced(again, "Hallo Welt, wie")
    assert done.consumed == 3 and done.serves(key, "Hallo Welt, wie")


def test_an_unfinished_draft_used_up_needs_a_new_engine_call() -> None:
    pieces = Pieces(b"Hallo", b" Welt,")
    texts = DraftText(pieces.ids, pieces.decode)
    key = PromptKey(("Hello", "world,", "how"), None, (), 2)
    cache = CachedDraft(key, (0, 1), texts, False, 2, "Hallo Welt,")
    assert not cache.serves(key, "Hallo Welt,")
    assert CachedDraft(key, (0, 1), texts, True, 2, "Hallo Welt,").serves(key, "Hallo Welt,")
