"""Cutting streamed LLM text into speakable clauses."""

from __future__ import annotations

from typing import TypedDict, Unpack

from hypothesis import given
from hypothesis import strategies as st

from dragoman.streaming.clauses import ClauseCutter, chinese_tokens, speakable, spoken_length


class CutterParams(TypedDict, total=False):
    """`ClauseCutter`'s fields, as keywords."""

    first_min_chars: int
    first_min_words: int
    first_max_words: int
    min_chars: int
    max_chars: int
    language: str
    whole_word_pieces: bool


def cut(pieces: list[str], **params: Unpack[CutterParams]) -> list[str]:
    cutter = ClauseCutter(**params)
    clauses = [clause for piece in pieces for clause in cutter.push(piece)]
    rest = cutter.finish()
    return clauses + ([rest] if rest else [])


def test_sentences_are_cut_as_soon_as_they_end() -> None:
    cutter = ClauseCutter(first_min_chars=20)
    assert cutter.push("Hello there, my friend") == [], "a short first clause waits for more"
    assert cutter.push(".") == ["Hello there, my friend."], "no need to wait for the space"
    assert cutter.push(" How are you") == []
    assert cutter.push("?") == ["How are you?"]
    assert cutter.finish() == ""


def test_a_final_period_that_may_still_grow_waits_for_the_next_piece() -> None:
    for start, rest, first in [
        ("It costs 3.", "50 dollars now. Yes.", "It costs 3.50 dollars now."),
        ("Ask Dr.", " Smith today. Yes.", "Ask Dr. Smith today."),
        ("Wait..", ". Yes.", "Wait..."),
        ("Meet J.", " Doe there. Yes.", "Meet J. Doe there."),
    ]:
        cutter = ClauseCutter()
        assert cutter.push(start) == [], start
        assert cutter.push(rest) == [first, "Yes."], start


def test_the_first_clause_breaks_between_words_before_any_mark() -> None:
    cutter = ClauseCutter()
    assert cutter.push("The capital of France") == [], "'France' may still grow"
    assert cutter.push(" is") == [], "'is' may still grow into 'island'"
    assert cutter.push(" Paris") == ["The capital of France"], "a phrase opener follows"
    assert cutter.push(", the city of light") == []
    assert cutter.push(" and love.") == ["is Paris, the city of light and love."]
    words = cut(["Seven big red apples fell down today"])
    assert words == ["Seven big red apples fell down", "today"], "at most 6 words"
    assert cut(["I think you know the answer"])[0] == "I think you know the answer"


def test_the_first_clause_breaks_before_a_phrase_opener_of_its_own_language() -> None:
    """The interpreter's German and Italian translations: "weil" and "perché" open a phrase as
    "because" does; English's openers are not German's ("die" is an article there)."""
    german = ClauseCutter(language="de")
    assert german.push("Viele Menschen denken nicht daran") == []
    assert german.push(" weil sie") == ["Viele Menschen denken nicht daran"]
    italian = ClauseCutter(language="it")
    assert italian.push("Molte persone non pensano") == []
    assert italian.push(" perché hanno") == ["Molte persone non pensano"]
    assert cut(["Die Stile im Westen die"], language="de") == ["Die Stile im Westen die"]
    assert cut(["Le cose belle di oggi"]) == ["Le cose belle di oggi"], "'di' opens nothing in English"
    assert cut(["Le cose belle di oggi"], language="it") == ["Le cose belle", "di oggi"]


def test_a_spoken_answer_cuts_its_first_clause_after_two_to_four_words() -> None:
    cutter = ClauseCutter.spoken_answer()
    assert cutter.push("The capital") == [], "'capital' may still grow"
    assert cutter.push(" of") == [], "'of' may still grow into 'often'"
    assert cutter.push(" France") == ["The capital"], "two words, and a phrase opener follows"
    assert cutter.push(" is Paris") == []
    assert cutter.push(".") == ["of France is Paris."], "later clauses as the defaults"
    spoken = ClauseCutter.spoken_answer()
    assert [c for piece in ["Seven", " big", " red", " apples", " fell"] for c in spoken.push(piece)] == [
        "Seven big red apples"
    ], "at most 4 words, cut once the fifth begins"
    assert cut(["Yes it is"], first_min_words=2, first_max_words=4) == ["Yes it is"]
    # The defaults (the interpreter's) still wait for more.
    words = ["Seven", " big", " red", " apples", " fell", " down", " today"]
    assert cut(words)[0] == "Seven big red apples fell down"


def test_later_clauses_do_not_break_between_words() -> None:
    clauses = cut(["Yes. The capital of France is Paris and it is big."])
    assert clauses == ["Yes.", "The capital of France is Paris and it is big."]


def test_numbers_abbreviations_and_initials_do_not_end_a_sentence() -> None:
    text = "It costs 3.50 dollars, said Dr. Smith of J. Doe Inc. to me. Then he left."
    assert cut([text], first_min_chars=200, min_chars=200) == [
        "It costs 3.50 dollars, said Dr. Smith of J. Doe Inc. to me.",
        "Then he left.",
    ]


def test_commas_cut_only_long_enough_clauses_and_the_first_may_be_shorter() -> None:
    text = "Well, first of all, you should take the train to the city, then walk north, and ask."
    clauses = cut([text], first_min_chars=10, min_chars=40)
    assert clauses[0] == "Well, first of all,", "the first clause is short, for a quick first sound"
    assert all(len(c) >= 40 for c in clauses[1:-1])
    assert " ".join(clauses) == text


def test_cjk_marks_cut_without_a_space() -> None:
    assert cut(["你好。今天天气很好！我们走吧"]) == ["你好。", "今天天气很好！", "我们走吧"]


def test_a_wide_character_counts_as_a_syllable() -> None:
    # Counted as letters, a Chinese clause of 4 or 5 syllables was short of the first clause's
    # 12, and one of 15 short of the later clauses' 40: each waited for the sentence's end.
    assert cut(["在我看来，这个问题很简单。"]) == ["在我看来，", "这个问题很简单。"]
    assert cut(["然而，", "由于通讯渠道缓慢，"]) == ["然而，由于通讯渠道缓慢，"], "2 syllables: too short"
    later = cut(["好的。", "我们明天早上去，然后下午回来，晚上再说吧。"])
    assert later == ["好的。", "我们明天早上去，然后下午回来，", "晚上再说吧。"]
    assert spoken_length("然而，") == 9 and spoken_length("ab c") == 4


def test_the_first_clause_without_spaces_may_end_where_a_piece_ended() -> None:
    # The interpreter's MT commits of FLEURS en_fleurs_test_001 and _002 translated into Chinese.
    cutter = ClauseCutter()
    assert cutter.push("所有") == []
    assert cutter.push("在世界一边的") == [], "the piece may still grow"
    assert cutter.push("名词") == ["所有在世界一边的"], "8 characters, and another piece came"
    assert cutter.push("，都以大写字母开头，") == [], "later clauses: marks only, 14 characters"
    assert cutter.push("即使在句子的中间。") == ["名词，都以大写字母开头，即使在句子的中间。"]
    assert cut(["所有", "在世界一边的", "名词"], first_min_chars=30) == ["所有在世界一边的名词"]
    assert cut(["巴黎是", "法国", "的首都"]) == ["巴黎是法国", "的首都"], "four characters of speech"
    assert cut(["白菜", "汁的颜色"]) == ["白菜汁的颜色"], "two characters are too few"
    assert cut(["Paris", " is", " big"]) == ["Paris is big"], "spaced text: words, as before"


def test_a_first_chinese_clause_ends_where_a_word_does() -> None:
    # FLEURS en_fleurs_test_002 into Chinese: MT committed "近在" before "咫尺" ("within easy
    # reach"), and a voice that stops between them is heard as "竟在? 直迟".
    pieces = ["向北和近在", "咫尺", "的小镇"]
    assert cut(pieces, language="zh") == ["向北和近在咫尺", "的小镇"]
    assert cut(pieces) == ["向北和近在", "咫尺的小镇"], "no word list for another language"
    assert chinese_tokens("向北和近在咫尺的") == [(0, 2), (2, 3), (3, 7), (7, 8)]
    # A Latin word in the translation begins a word, as a Chinese character does.
    assert cut(["今天的天气", " Paris", "很好。"], language="zh") == ["今天的天气", "Paris很好。"]


def test_a_first_chinese_clause_counts_jiebas_words_as_an_english_one_counts_words() -> None:
    # en_fleurs_test_003 into Chinese: MT committed the middle of the sentence in one piece,
    # and the sentence has no mark before its end; its first clause waited for it (6.2 s
    # after the first text). It ends before a phrase opener ("会", will) after three words...
    mixed = ["白菜", "汁", "的颜色会根据 cabbage的", "酸碱性变化。"]
    assert cut(mixed, language="zh") == ["白菜汁的颜色", "会根据 cabbage的酸碱性变化。"]
    # ... or at the end of the sixth, unless a mark follows: the mark ends the clause.
    assert cut(["我们明天早上坐火车去北京看看"], language="zh") == ["我们明天早上坐火车去北京", "看看"]
    assert cut(["他说", "，我们明天早上坐"], language="zh") == ["他说，我们明天早上坐"]
    marked = cut(["由于通信渠道", "，西方的"], language="zh")
    assert marked == ["由于通信渠道，", "西方的"], "a mark stays with the clause it ends"


def test_a_long_run_without_spaces_is_cut_where_its_length_runs_out() -> None:
    text = "字" * 40
    clauses = cut([text], max_chars=30)
    assert all(spoken_length(c) <= 30 for c in clauses) and len(clauses) == 4
    assert "".join(clauses) == text


def test_a_long_run_without_marks_is_cut_at_a_space() -> None:
    words = " ".join(["word"] * 60)
    clauses = cut([words], max_chars=50)
    assert all(len(c) <= 50 for c in clauses)
    assert " ".join(clauses) == words


@given(st.lists(st.text(alphabet="ab .,!?\n我。", max_size=12), max_size=20))
def test_nothing_is_lost_or_reordered_whatever_the_pieces(pieces: list[str]) -> None:
    clauses = cut(pieces)
    assert "".join("".join(pieces).split()) == "".join("".join(clauses).split())
    assert all(c == c.strip() and c for c in clauses)


def test_speakable_drops_markdown_a_voice_would_read_out() -> None:
    text = "## Steps\n- **Open** the `door`\n1. Walk in\n```python\n"
    assert speakable(text).split() == ["Steps", "Open", "the", "door", "Walk", "in"]


def test_a_piece_that_ends_on_a_whole_word_may_end_the_first_clause_at_once() -> None:
    # An MT commit ends where a word ends: the interpreter's first clause need not wait for
    # the next commit to show that its last word is whole.
    mt = ClauseCutter(language="de", whole_word_pieces=True)
    assert mt.push("Allerdings hängen") == [], "two words: fewer than first_min_words"
    assert mt.push(" die Stile") == ["Allerdings hängen die Stile"]
    assert mt.push(" im Westen") == [], "later clauses as before"
    llm = ClauseCutter(language="de")
    assert [c for p in ["Allerdings hängen", " die Stile"] for c in llm.push(p)] == [], "may still grow"
    zh = ClauseCutter(language="zh", whole_word_pieces=True)
    assert zh.push("然而") == [], "two characters: shorter than first_min_chars"
    assert zh.push("由于") == ["然而由于"]
    assert zh.push("，交流迟缓") == [], "the mark the cut left behind is not a clause of its own"
    assert zh.finish() == "交流迟缓"


@given(st.lists(st.sampled_from(["Allerdings", " hängen", " die", ",", " Stile", ".", " Ja", "，", "年"])))
def test_no_clause_starts_with_a_clause_mark(pieces: list[str]) -> None:
    for language in ("de", "zh"):
        for clause in cut(pieces, language=language, whole_word_pieces=True):
            assert clause and clause[0] not in ",;:，；：、", clause


def test_the_words_so_far_may_be_cut_where_the_last_piece_ended() -> None:
    mt = ClauseCutter(language="it", whole_word_pieces=True)
    assert mt.push("Tuttavia, a causa") == ["Tuttavia, a causa"], "the first clause: three words"
    assert mt.push(" della") == [] and mt.cut_words() == "", "one word"
    assert mt.push(" lentezza delle vie") == []
    assert mt.cut_words() == "della lentezza delle vie"
    assert mt.cut_words() == "" and mt.finish() == ""
    assert ClauseCutter(language="it").cut_words() == "", "only where pieces end on whole words"
