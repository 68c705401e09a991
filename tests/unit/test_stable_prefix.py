from dragoman.streaming.deltas import DeltaLedger
from dragoman.streaming.stable_prefix import stable_prefix
from tests.unit.fakes import ByteTokenizer, WordTokenizer


def test_drops_the_last_unfixed_tokens() -> None:
    assert stable_prefix(" the quick brown fox jumps", WordTokenizer(), 2) == " the quick brown"


def test_short_hypothesis_leaves_no_prefix() -> None:
    assert stable_prefix(" hello there", WordTokenizer(), 5) == ""
    assert stable_prefix("", WordTokenizer(), 0) == ""


def test_zero_unfixed_tokens_keeps_everything() -> None:
    assert stable_prefix(" all of it", WordTokenizer(), 0) == " all of it"


def test_cut_inside_a_multibyte_character_backs_off() -> None:
    text = "你好世界"  # 3 bytes a character, one token a byte
    # Dropping 2 byte-tokens cuts inside 界: back off to the whole characters before it.
    assert stable_prefix(text, ByteTokenizer(), 2) == "你好世"
    # Dropping 3 is a clean cut already.
    assert stable_prefix(text, ByteTokenizer(), 3) == "你好世"
    assert stable_prefix(text, ByteTokenizer(), 4) == "你好"


def test_emoji_cut_backs_off() -> None:
    text = "ok 👍"  # the emoji is 4 bytes
    assert stable_prefix(text, ByteTokenizer(), 1) == "ok"


def test_ledger_sends_only_extensions() -> None:
    ledger = DeltaLedger()
    assert ledger.advance("Hello") == "Hello"
    assert ledger.advance("Hello world") == " world"
    assert ledger.advance("Hello world") == ""
    assert ledger.revisions == 0


def test_ledger_never_resends_a_revision() -> None:
    # PROTOCOLS.md: "word" then a revision to "world is" must not arrive as "wordld is".
    ledger = DeltaLedger()
    sent = ledger.advance("word")
    assert ledger.advance("world is") == ""
    assert ledger.revisions == 1
    assert sent == "word"
    # Once the hypothesis agrees with what was sent again, it goes on from there.
    assert ledger.advance("word is here") == " is here"
    assert ledger.revisions == 1


def test_ledger_shrinking_firm_text_is_not_a_revision() -> None:
    ledger = DeltaLedger()
    ledger.advance("Hello world")
    assert ledger.advance("Hello") == ""
    assert ledger.revisions == 0


def test_prefix_never_ends_in_whitespace() -> None:
    # A tokenizer that splits " the" into " " + "the" (a lost BPE merge) must not leave a lone space.
    assert stable_prefix("relationships. At the end", ByteTokenizer(), 7) == "relationships. At"
