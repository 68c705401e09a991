"""The append-only delta ledger: extensions, revisions of sent text, and resuming after them."""

from dragoman.streaming.deltas import DeltaLedger


def feed(ledger: DeltaLedger, *firm: str) -> list[str]:
    return [ledger.advance(text) for text in firm]


def test_sends_only_extensions() -> None:
    ledger = DeltaLedger()
    assert feed(ledger, "Hello", "Hello world", "Hello world") == ["Hello", " world", ""]
    assert ledger.sent == "Hello world"
    assert ledger.revisions == 0


def test_shrinking_firm_text_is_no_revision() -> None:
    ledger = DeltaLedger()
    assert feed(ledger, "Hello world", "Hello", "Hello world again") == ["Hello world", "", " again"]
    assert ledger.revisions == 0


def test_a_revision_is_never_resent() -> None:
    # PROTOCOLS.md: "word" then a revision to "world is" must not arrive as "wordld is".
    ledger = DeltaLedger()
    assert feed(ledger, "word", "world is") == ["word", " is"]
    assert ledger.sent == "word is"
    assert ledger.revisions == 1


def test_deltas_resume_after_a_revised_last_word() -> None:
    # Seen with whisper-base on an AVX2-only EPYC: a step heard "Jingle", the next ones
    # "Jingo poem". The sent word stands for the revised one, and the item goes on streaming.
    ledger = DeltaLedger()
    sent = feed(
        ledger,
        "the song of the Jingle",
        "the song of the Jingo poem",
        "the song of the Jingo poem which was sung",
        "the song of the Jingo poem which was sung at dawn",
    )
    assert sent == ["the song of the Jingle", " poem", " which was sung", " at dawn"]
    assert "".join(sent) == ledger.sent == "the song of the Jingle poem which was sung at dawn"
    assert ledger.revisions == 1


def test_deltas_resume_where_the_hypothesis_agrees_again() -> None:
    # Only the middle word was revised; the sent words after it are still heard.
    ledger = DeltaLedger()
    assert feed(ledger, "we met in Paris last", "we met in Perris last year") == [
        "we met in Paris last",
        " year",
    ]
    assert ledger.sent == "we met in Paris last year"
    # A revised word that became two: the agreement after it still anchors the span.
    ledger = DeltaLedger()
    assert feed(ledger, "a cattle rise up", "a cat all rise up now") == ["a cattle rise up", " now"]
    assert ledger.revisions == 1


def test_a_revision_waits_for_the_hypothesis_to_reach_the_sent_text() -> None:
    # The new hypothesis is shorter than the sent words it revises: nothing is sent until
    # it covers them, and nothing sent is repeated when it does.
    ledger = DeltaLedger()
    assert feed(
        ledger, "one two threefold", "one two thr", "one two three fold", "one two three fold four"
    ) == [
        "one two threefold",
        "",
        "",
        " four",
    ]
    assert ledger.sent == "one two threefold four"
    # "one two thr" agrees with the sent text (it is shorter), so only the divergent step counts.
    assert ledger.revisions == 1


def test_a_hypothesis_still_short_of_the_revised_words_counts_but_sends_nothing() -> None:
    ledger = DeltaLedger()
    assert feed(ledger, "it was a wonderful", "it was a won", "it was a wan", "it was a wanderful day") == [
        "it was a wonderful",
        "",
        "",
        " day",
    ]
    assert ledger.sent == "it was a wonderful day"
    assert ledger.revisions == 2


def test_revisions_of_a_revision_keep_the_mapping() -> None:
    ledger = DeltaLedger()
    sent = feed(ledger, "red fox", "red box jumps", "red socks jumps over", "red socks jumps over it")
    assert sent == ["red fox", " jumps", " over", " it"]
    assert ledger.sent == "red fox jumps over it"
    assert ledger.revisions == 2


def test_completion_after_a_revision_sends_the_rest() -> None:
    # The final step's transcript goes through the ledger too: the deltas reach the end of
    # the item, and only the revised words differ from `completed`.
    ledger = DeltaLedger()
    feed(ledger, "alpha betta", "alpha bet a gamma")
    assert ledger.advance("alpha bet a gamma delta epsilon.") == " delta epsilon."
    assert ledger.sent == "alpha betta gamma delta epsilon."


def test_text_without_spaces_maps_character_by_character() -> None:
    # CJK text has no spaces: each character counts as a word.
    ledger = DeltaLedger()
    assert feed(ledger, "你好世", "你好是界的") == ["你好世", "界的"]
    assert ledger.sent == "你好世界的"
