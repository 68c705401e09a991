"""Which tokens a translation may never choose: East Asian ones in a Latin-script language, a
lowercase Latin word in Chinese, and an opening quote its source does not have."""

from __future__ import annotations

from collections.abc import Callable

from dragoman.engines.mt.target_script import (
    TargetScript,
    east_asian_tokens,
    lowercase_words,
    quote_tokens,
    quoted,
)

PIECES = [
    b"hello",
    " Stra\u00dfe".encode(),  # German: two-byte letters stay
    "perch\u00e9".encode(),  # Italian
    "\u201cquoted\u201d \u2013 \u20ac5".encode(),  # curly quotes, a dash, the euro sign
    "\u6b66\u88c5".encode(),  # 武装: CJK ideographs
    b" Islamic\xe6\xad\xa6",  # Latin, then an ideograph
    b"\xe4",  # a byte piece: the lead byte of an ideograph
    "\u306e".encode(),  # の: kana
    "\ud55c".encode(),  # 한: Hangul
    "\u3002".encode(),  # 。: CJK punctuation
    b"",  # a control token (<|im_end|>) has no bytes
]


def test_east_asian_characters_and_their_lead_bytes_are_excluded_latin_letters_are_not() -> None:
    mask = east_asian_tokens(PIECES.__getitem__, len(PIECES))
    assert mask.tolist() == [False, False, False, False, True, True, True, True, True, True, False]


def recorded(pieces: list[bytes], calls: list[int]) -> Callable[[int], bytes]:
    """`pieces` as a vocabulary that records each token asked about in `calls`."""

    def piece(token: int) -> bytes:
        calls.append(token)
        return pieces[token]

    return piece


def test_only_latin_script_targets_exclude_tokens_and_the_mask_is_built_once() -> None:
    calls: list[int] = []
    scripts = TargetScript(recorded(PIECES, calls), len(PIECES))
    assert scripts.excluded("zh") is None and not calls, "Chinese may be written in Chinese"
    english = scripts.excluded("en")
    assert english is not None and int(english.sum()) == 6
    assert scripts.excluded("de") is english and len(calls) == len(PIECES), "built once"


QUOTING = [
    b'"',
    b' "',  # after a space: the first token of a translation is often one
    b'"Von',
    " \u201eWir".encode(),  # German low-9 opening quote
    " \u00abDie".encode(),  # guillemets
    "\u300c\u6211".encode(),  # a CJK corner bracket
    b"Von",
    b" 1960",
    b"'s",  # an apostrophe is no quotation mark
    " \u2019".encode(),
    b" ",
    b"",
    b"\xe2\x80",  # a byte piece: no character on its own
]


def test_tokens_that_open_with_a_quotation_mark_after_any_space() -> None:
    mask = quote_tokens(QUOTING.__getitem__, len(QUOTING))
    assert mask.tolist() == [True] * 6 + [False] * 7


def test_a_source_is_quoted_by_a_quotation_mark_not_by_an_apostrophe() -> None:
    assert quoted(['"We', "now", "have"])
    assert quoted(["sagte:", "\u201eWir"])
    assert quoted(["\u4ed6\u8bf4\u300c\u6211"])
    assert not quoted(["Throughout", "1960s,", "Brzezinski"])
    assert not quoted(["Ring's", "CEO,", "Jamie", "Siminoff\u2019s"])
    assert not quoted([])


def test_the_opening_quote_mask_is_built_once() -> None:
    calls: list[int] = []
    scripts = TargetScript(recorded(QUOTING, calls), len(QUOTING))
    first = scripts.opening_quotes()
    assert scripts.opening_quotes() is first and len(calls) == len(QUOTING)
    assert int(first.sum()) == 6


WORDS = [
    b" cocktail",  # 0: a space, then a lowercase letter: always a new word
    b"previously",  # 1: no space: a new word, unless it goes on from a letter
    b"inov",  # 2: the rest of "Sim|inov"
    b" Sim",  # 3: capitalised: a name may stay in Latin letters
    b"QVC",  # 4
    "\u6df7\u5408\u7269".encode(),  # 5: 混合物
    "\uff0c".encode(),  # 6: a fullwidth comma
    b"5",  # 7
    b"-map",  # 8: a hyphen first
    b"'s",  # 9
    "\u00e9t\u00e9".encode(),  # 10: a non-ASCII letter first
    b"\n",  # 11
    b"",  # 12: a control token
]


def test_lowercase_words_start_after_a_space_or_after_anything_but_a_latin_letter() -> None:
    words = lowercase_words(WORDS.__getitem__, len(WORDS))
    assert words.spaced.nonzero()[0].tolist() == [0]
    assert words.any_start.nonzero()[0].tolist() == [0, 1, 2]
    assert words.ends_in_letter.nonzero()[0].tolist() == [0, 1, 2, 3, 4, 8, 9]
    # After " Sim", "inov" may finish the name; " cocktail" may not follow it.
    assert words.after(3).nonzero()[0].tolist() == [0]
    for token in (5, 6, 7, 11):  # after Chinese, punctuation, a digit or a newline
        assert words.after(token).nonzero()[0].tolist() == [0, 1, 2], token
    assert not words.after(3)[3] and not words.after(5)[4], "capitalised words stay"


def test_only_chinese_targets_exclude_lowercase_words_and_the_masks_are_built_once() -> None:
    calls: list[int] = []
    scripts = TargetScript(recorded(WORDS, calls), len(WORDS))
    assert scripts.lowercase_words("de") is None and scripts.lowercase_words("en") is None
    assert not calls, "Latin-script targets write Latin words"
    chinese = scripts.lowercase_words("zh")
    assert chinese is not None and scripts.lowercase_words("zh") is chinese
    assert len(calls) == len(WORDS), "built once"


def test_prepare_builds_the_masks_of_the_served_targets_before_any_draft() -> None:
    calls: list[int] = []
    scripts = TargetScript(recorded(WORDS, calls), len(WORDS))
    scripts.prepare(["de"])
    assert len(calls) == 2 * len(WORDS), "the East Asian mask and the opening quotes"
    scripts.prepare(["zh"])
    assert len(calls) == 3 * len(WORDS), "the lowercase-word rule"
    scripts.excluded("it")
    scripts.lowercase_words("zh")
    scripts.opening_quotes()
    assert len(calls) == 3 * len(WORDS), "a draft then builds nothing"
