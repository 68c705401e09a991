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


def test_prefix_never_ends_in_whitespace() -> None:
    # A tokenizer that splits " the" into " " + "the" (a lost BPE merge) must not leave a lone space.
    assert stable_prefix("relationships. At the end", ByteTokenizer(), 7) == "relationships. At"
