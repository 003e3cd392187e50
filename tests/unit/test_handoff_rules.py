"""The hand-off block a new native conversation gets when the session's saved one is lost
(sessions/core/handoff.py): everything in order while it fits, else the newest turns and
how many were left out; one long message is cut and says so."""

from sessions.core.handoff import EACH_CHARS, Exchange, text


def test_nothing_before_means_no_handoff():
    assert text([]) is None


def test_every_turn_in_order_while_it_fits():
    block = text([Exchange("first", "one"), Exchange("second", "")])
    assert block.index("user: first") < block.index("you: one") < block.index("user: second")
    assert "left out" not in block and block.count("you:") == 1


def test_over_the_bound_the_newest_turns_stay_and_the_rest_is_counted():
    turns = [Exchange(f"message {n} " + "x" * 900, f"reply {n}") for n in range(40)]
    block = text(turns, limit=10_000)
    assert len(block) <= 10_000
    assert "message 39 " in block and "message 0 " not in block
    kept = block.count("user: message")
    assert f"({40 - kept} earlier turns left out for length.)" in block


def test_one_long_message_is_cut_and_says_how_much():
    block = text([Exchange("y" * (EACH_CHARS + 10), "ok")])
    assert "[…10 more characters not shown]" in block
