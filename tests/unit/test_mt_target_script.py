"""Which tokens a translation into a Latin-script language may never choose."""

from __future__ import annotations

from dragoman.engines.mt.target_script import TargetScript, east_asian_tokens

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


def test_only_latin_script_targets_exclude_tokens_and_the_mask_is_built_once() -> None:
    calls: list[int] = []

    def piece(token: int) -> bytes:
        calls.append(token)
        return PIECES[token]

    scripts = TargetScript(piece, len(PIECES))
    assert scripts.excluded("zh") is None and not calls, "Chinese may be written in Chinese"
    english = scripts.excluded("en")
    assert english is not None and int(english.sum()) == 6
    assert scripts.excluded("de") is english and len(calls) == len(PIECES), "built once"
