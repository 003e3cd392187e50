"""amux run's restart rule: a child that exits on its own starts again after a doubling
backoff; more exits of one child than the limit within the window is a crash loop."""

from amux_site.supervisor import CrashPolicy


def test_backoff_doubles_to_its_cap_and_the_limit_makes_a_crash_loop():
    policy = CrashPolicy(limit=6, window=300, first_delay=1, max_delay=8)
    assert [policy.on_exit("web", t) for t in (0, 1, 2, 3, 4, 5)] == [1, 2, 4, 8, 8, 8]
    assert policy.on_exit("web", 6) is None  # the seventh within 300 s
    assert policy.on_exit("beat", 6) == 1  # each child counts its own


def test_exits_older_than_the_window_are_forgotten():
    policy = CrashPolicy(limit=1, window=60)
    assert policy.on_exit("web", 0) == 1
    assert policy.on_exit("web", 61) == 1  # the first is out of the window
    assert policy.on_exit("web", 62) is None


def test_a_limit_of_zero_stops_at_the_first_exit():
    assert CrashPolicy(limit=0).on_exit("web", 0) is None
