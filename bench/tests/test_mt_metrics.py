"""LAAL and per-unit delays against small cases worked out by hand."""

from __future__ import annotations

import pytest

from bench.mt_metrics import Emission, laal, sentence_laal, unit_delays, units


def test_units_words_for_de_chars_for_zh() -> None:
    assert units("Hallo  Welt, wie", "de") == ["Hallo", "Welt,", "wie"]
    assert units("你好 世界。", "zh") == ["你", "好", "世", "界", "。"]
    assert units("", "it") == []


def test_laal_evenly_paced_lags_by_one_step() -> None:
    # rate = 3000 / 3 = 1000 ms per unit; every lag is 1000 ms.
    assert laal([1000, 2000, 3000], 3000, 3) == pytest.approx(1000.0)


def test_laal_uses_the_longer_of_hypothesis_and_reference() -> None:
    # Six hypothesis units against a 3-unit reference: rate = 3000 / 6 = 500.
    # Lags 500, 500, 500, 500, then 3000 - 4 * 500 = 1000, where d reaches |X|: tau = 5.
    assert laal([500, 1000, 1500, 2000, 3000, 3000], 3000, 3) == pytest.approx(3000 / 5)
    # A longer reference lowers the rate instead: rate = 3000 / 4 = 750.
    # Lags 1000, 2000 - 750 = 1250, 3000 - 1500 = 1500 (tau = 3).
    assert laal([1000, 2000, 3000], 3000, 4) == pytest.approx((1000 + 1250 + 1500) / 3)


def test_laal_first_delay_past_the_source_is_the_score() -> None:
    assert laal([4000, 4500], 3000, 2) == pytest.approx(4000.0)


def test_laal_stops_at_the_first_unit_at_source_end() -> None:
    # Units after the cutoff do not count: 1000, 3000 - 1000 = 2000, then stop.
    assert laal([1000, 3000, 9000], 3000, 3) == pytest.approx(1500.0)


def test_laal_rejects_empty_and_zero_length() -> None:
    with pytest.raises(ValueError):
        laal([], 1000, 1)
    with pytest.raises(ValueError):
        laal([1.0], 0, 1)


def test_unit_delays_credit_a_word_only_in_its_final_form() -> None:
    emissions = [
        Emission(1000, 1200, "Die"),
        Emission(2000, 2500, "Die Kinder"),  # a piece of "Kinderschuhen": no credit yet
        Emission(3000, 3600, "Die Kinderschuhen sind"),
        Emission(3000, 4000, "Die Kinderschuhen sind klein."),
    ]
    ideal, elapsed = unit_delays(emissions, "Die Kinderschuhen sind klein.", "de")
    assert ideal == [1000, 3000, 3000, 3000]
    assert elapsed == [1200, 3600, 3600, 4000]


def test_unit_delays_count_characters_for_zh() -> None:
    emissions = [
        Emission(500, 700, "我们"),
        Emission(1500, 1900, "我们现在"),
        Emission(2000, 2600, "我们现在有。"),
    ]
    ideal, elapsed = unit_delays(emissions, "我们现在有。", "zh")
    assert ideal == [500, 500, 1500, 1500, 2000, 2000]
    assert elapsed == [700, 700, 1900, 1900, 2600, 2600]


def test_unit_delays_after_a_divergence_fall_back_to_the_last_emission() -> None:
    emissions = [Emission(1000, 1000, "A B"), Emission(2000, 2500, "A C D")]
    ideal, elapsed = unit_delays(emissions, "A C D", "it")
    assert ideal == [1000, 2000, 2000]
    assert elapsed == [1000, 2500, 2500]


def test_sentence_laal_ideal_and_computation_aware() -> None:
    emissions = [
        Emission(1000, 1500, "a"),
        Emission(2000, 2600, "a b"),
        Emission(3000, 3600, "a b c"),
    ]
    result = sentence_laal(emissions, "a b c", "x y z", "de", 3000)
    assert result is not None
    # Ideal: lags 1000, 1000, 1000.
    assert result.ideal_ms == pytest.approx(1000.0)
    # Elapsed 1500, 2600, 3600 at rate 1000: lags 1500, 1600, 1600 (3600 >= 3000 stops it).
    assert result.computation_aware_ms == pytest.approx(4700 / 3)


def test_sentence_laal_of_an_empty_hypothesis_is_none() -> None:
    assert sentence_laal([Emission(1000, 1000, "")], "", "x y", "de", 3000) is None
