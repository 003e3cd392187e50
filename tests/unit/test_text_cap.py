"""The inbound text cap: short texts pass whole; long ones are cut with a marker."""

from hypothesis import given
from hypothesis import strategies as st

from intake.text_cap import MAX_TEXT, cap_text, cut_marker


def test_a_text_within_the_limit_is_kept_whole():
    assert cap_text("fix the login bug") == "fix the login bug"
    exact = "x" * MAX_TEXT
    assert cap_text(exact) == exact


def test_a_long_text_keeps_its_beginning_and_says_how_much_was_cut():
    text = "a" * 1_000_000
    capped = cap_text(text)
    assert len(capped) <= MAX_TEXT
    kept = capped.index("\n\n[… cut by amux:")
    assert capped[:kept] == "a" * kept
    assert capped.endswith(cut_marker(len(text) - kept))
    assert capped.endswith(f"{len(text) - kept:,} more characters]")


def test_one_character_over_is_cut_too():
    capped = cap_text("b" * (MAX_TEXT + 1))
    assert len(capped) <= MAX_TEXT and "cut by amux" in capped


@given(st.text(max_size=300), st.integers(min_value=40, max_value=200))
def test_the_cut_never_exceeds_the_limit_and_never_changes_a_fitting_text(text, limit):
    capped = cap_text(text, limit)
    assert len(capped) <= limit
    if len(text) <= limit:
        assert capped == text
    else:
        kept = capped.rindex("\n\n[… cut by amux: ")
        assert capped == text[:kept] + cut_marker(len(text) - kept)
