from dragoman.streaming.stable_prefix import agreed_prefix, stable_prefix
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


def test_prefix_never_ends_in_whitespace() -> None:
    # A tokenizer that splits " the" into " " + "the" (a lost BPE merge) must not leave a lone space.
    assert stable_prefix("relationships. At the end", ByteTokenizer(), 7) == "relationships. At"


def test_agreement_is_on_whole_words_both_hypotheses_start_with() -> None:
    assert agreed_prefix("However, due", "However, due to the slow") == "However,"
    assert agreed_prefix("All nails are", "All nouns alongside") == "All"
    assert agreed_prefix("the quick brown", "the quick brown fox") == "the quick"
    # Exactly: a word said with other punctuation or case is not agreed on.
    assert agreed_prefix(" However.", " However, due to") == ""
    assert agreed_prefix(" On Monday, Sara", " On monday, sara day") == " On"


def test_a_hypothesis_cut_off_mid_word_agrees_on_no_stem() -> None:
    # The shorter decode may end inside a word: its last word is not taken as said.
    assert agreed_prefix("The cab", "The cabbage juice") == "The"
    assert agreed_prefix("The cabbage", "The cabbage juice") == "The"
    # ... unless punctuation closes it.
    assert agreed_prefix("Hello there.", "Hello there. How are") == "Hello there."


def test_nothing_agreed_without_a_common_word() -> None:
    assert agreed_prefix("", "Hello") == ""
    assert agreed_prefix("Hello", "") == ""
    assert agreed_prefix("Oh well", "All nouns") == ""
    # Text without spaces has no word ends to agree on.
    assert agreed_prefix("你好", "你好世界") == ""
