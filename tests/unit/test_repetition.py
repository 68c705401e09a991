"""Repetition loops in a decoder's tokens (dragoman.engines.repetition), on word lists."""

from __future__ import annotations

from dragoman.engines.repetition import echo_start, loop_start, reread_length

WORDS: dict[str, int] = {}


def ids(text: str) -> list[int]:
    return [WORDS.setdefault(w, len(WORDS)) for w in text.split()]


def words(tokens: list[int]) -> str:
    names = {v: k for k, v in WORDS.items()}
    return " ".join(names[t] for t in tokens)


def clause_end(token: int) -> bool:
    return {v: k for k, v in WORDS.items()}[token] in {".", ","}


def cut(text: str, start: int = 0, at_limit: bool = False) -> str | None:
    tokens = ids(text)
    at = loop_start(tokens, start, at_limit=at_limit, clause_end=clause_end)
    return None if at is None else words(tokens[:at])


def test_a_hypothesis_that_starts_over_keeps_its_first_copy() -> None:
    loop = "And so my fellow Americans . " * 4 + "And so"
    assert cut(loop) == "And so my fellow Americans ."


def test_the_cut_ends_a_clause_when_the_cycle_has_one() -> None:
    assert cut("In addition , in addition , in addition , in addition , in") == "In addition ,"
    assert cut("one 25 . 25 . 25 . 25 . 25 . 25") == "one 25 ."


def test_speech_that_repeats_itself_is_no_loop() -> None:
    assert cut("no no no") is None  # too short to be a loop
    assert cut("ask what your country can do for you ask what you can do") is None
    assert cut("I said it twice . I said it twice .") is None  # two copies: speech
    # Two copies that ran into the length limit are a loop.
    assert cut("I said it twice . I said it twice .", at_limit=True) == "I said it twice ."


def test_a_forced_prefix_is_never_cut() -> None:
    text = "go on go on go on go on"
    assert cut(text) == "go on"
    assert cut(text, start=6) is None  # all of it was forced: nothing to cut
    assert cut(text, start=3) == "go on go"


def echo(text: str, prefix_words: int = 0, context: str = "") -> str | None:
    tokens = ids(text)
    at = echo_start(tokens, prefix_words, ids(context) if context else [])
    return None if at is None else words(tokens[:at])


def test_a_copy_of_the_prompt_is_cut_where_it_begins() -> None:
    prompt = "Mr. Foster 's pictures are a sort of up guards and at em paintings ,"
    text = "at one much in the same way that Mr. Carker used to flash his teeth . And " + prompt + " and"
    assert echo(text, prefix_words=3, context=prompt) == (
        "at one much in the same way that Mr. Carker used to flash his teeth . And"
    )


def test_short_repeats_and_the_forced_prefix_are_kept() -> None:
    prompt = "I do not know what to say"
    assert echo("I do not know what to do , really", context=prompt) is None  # six in a row: speech
    # A copy that lies within the forced prefix is not the decoder's doing.
    forced = "one two three four five six seven eight nine"
    assert echo(forced + " ten", prefix_words=9, context=forced) is None
    assert echo("a b c d e f g h a b c d e f g h a") == "a b c d e f g h"


def test_a_loop_that_began_in_the_forced_prefix_keeps_what_followed_it() -> None:
    # Forced: "… poem . Mr. Birk at"; the decoder goes on, then starts over from "Mr.".
    cycle = "Mr. Birk at Foster 's landscapes smile at one"
    text = "a jingo poem . " + " ".join([cycle] * 4)
    forced = 7  # "a jingo poem . Mr. Birk at"
    assert cut(text, start=forced) == "a jingo poem . " + cycle


PREFIX = "To the north and within easy reach is the romantic and fascinating town of sintra in which"


def test_a_second_reading_of_the_forced_prefix_is_dropped_and_what_follows_kept() -> None:
    prefix = ids(PREFIX)
    said = ids(PREFIX.split(" ", 1)[1] + " was made famous to foreigners")
    skip = reread_length(prefix, said)
    assert words(said[skip:]) == "was made famous to foreigners"
    # The whole prefix read again is a copy too.
    assert reread_length(prefix, ids(PREFIX + " was")) == len(prefix)


def test_a_start_over_that_stops_short_of_the_prefix_end_adds_nothing() -> None:
    prefix = ids(PREFIX)
    said = ids("the north .")
    assert reread_length(prefix, said) == len(said)
    assert reread_length(prefix, ids("To the north and within")) == 5


def test_text_that_goes_on_from_the_prefix_is_no_second_reading() -> None:
    prefix = ids(PREFIX)
    assert reread_length(prefix, ids("was made famous to foreigners after a glowing account")) == 0
    # A short repeat of the prefix's end is speech ("in which, in which"), not a reading.
    assert reread_length(prefix, ids("sintra in which was made famous")) == 0
    # One word of the prefix's start is no start over ("north" said once more).
    assert reread_length(prefix, ids("north winds blow")) == 0
    # A copy from the middle that stops before the prefix's end is not what this cuts.
    assert reread_length(prefix, ids("romantic and fascinating town of sintra")) == 0
    # A short prefix is never taken for re-read.
    assert reread_length(ids("To the north"), ids("the north .")) == 0
    assert reread_length([], ids("anything at all")) == 0
