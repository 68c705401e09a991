"""Which tokens a translation may never choose: East Asian ones in a Latin-script language, and
an opening quote its source does not have."""

from __future__ import annotations

from collections.abc import Callable

from dragoman.engines.mt.target_script import TargetScript, east_asian_tokens, quote_tokens, quoted

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
