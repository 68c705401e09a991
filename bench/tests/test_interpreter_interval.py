"""The interval of bench.interpreter's BLEU ratio."""

from __future__ import annotations

import math

from bench.interpreter import ratio_interval

REFERENCES = [
    "the cat sat on the mat today",
    "a storm is coming from the north",
    "she reads a book every evening",
    "the train leaves at seven sharp",
    "prices rose again in the spring",
]


def test_a_system_against_itself_has_a_ratio_of_one_on_every_draw() -> None:
    hypotheses = [
        "the cat sat on a mat",
        "a storm comes from the north",
        "she reads books",
        "the train leaves at seven",
        "prices rose in spring",
    ]
    low, high = ratio_interval(hypotheses, hypotheses, REFERENCES, "en", draws=200)
    assert math.isclose(low, 1.0) and math.isclose(high, 1.0)


def test_a_system_worse_on_every_sentence_stays_below_one() -> None:
    worse = ["the dog sat", "storm north", "she is reading", "the train goes", "prices went up"]
    low, high = ratio_interval(worse, REFERENCES, REFERENCES, "en", draws=200)
    assert 0.0 <= low <= high < 1.0


def test_one_sentence_that_differs_widens_the_interval_around_the_ratio() -> None:
    mixed = [*REFERENCES[:4], "prices went up"]
    low, high = ratio_interval(mixed, REFERENCES, REFERENCES, "en", draws=500)
    assert low < 1.0 and math.isclose(high, 1.0), "draws without the fifth sentence score 1"
