"""The default number of awake sessions per runtime worker, sized by memory."""

from amux_site.session_capacity import MAX, available_mb, from_memory


def test_three_quarters_of_the_available_memory_over_the_cost_of_a_session():
    assert from_memory(400, available=20_000) == 37
    assert from_memory(100, available=20_000) == 150


def test_at_least_one_and_at_most_max():
    assert from_memory(400, available=100) == 1
    assert from_memory(1, available=10_000_000) == MAX


def test_memavailable_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   20480000 kB\n")
    assert available_mb(meminfo) == 20000
    assert available_mb(tmp_path / "missing") is None
