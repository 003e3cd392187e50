"""The `make bench` runner: one JSON report of every figure; a bench that raises, crashes
or leaves a figure out has that figure recorded as not measured (never a number), the others
still run, and the exit status says so. The benches here are stand-ins
(tests/support/fake_benches.py) run in child processes like the real ones."""

import json

from bench import run as runner

FAKE = "tests.support.fake_benches"


def _run(tmp_path, benches):
    out = tmp_path / "latest.json"
    report, status = runner.run(list(benches), benches=benches, out_path=out, services=False)
    assert json.loads(out.read_text()) == report
    return report, status


def test_figures_of_every_bench_in_one_report(tmp_path):
    report, status = _run(tmp_path, {"good": (f"{FAKE}:good", ["fake_rate"], 60)})
    assert status == 0
    assert set(report["machine"]) >= {"cores", "load"}
    assert report["machine"]["cores"] >= 1 and len(report["machine"]["load"]) == 3
    figures = report["figures"]
    assert {n: {k: v for k, v in f.items() if k not in ("at", "load")}
            for n, f in figures.items()} == {
        "fake_rate": {"value": 12.5, "unit": "x", "goal": ">= 10", "met": True,
                      "bench": "good"},
        "fake_extra": {"value": 3, "unit": "ms", "goal": "-", "met": None, "note": "n",
                       "bench": "good"}}
    assert figures["fake_rate"]["load"] >= 0


def test_running_some_benches_keeps_the_others_figures(tmp_path):
    benches = {"good": (f"{FAKE}:good", ["fake_rate"], 60),
               "raises": (f"{FAKE}:raises", ["fake_a"], 60)}
    out = tmp_path / "latest.json"
    runner.run(["good"], benches=benches, out_path=out, services=False)
    report, status = runner.run(["raises"], benches=benches, out_path=out, services=False)
    assert status == 1
    assert report["figures"]["fake_rate"]["value"] == 12.5  # from the first run
    assert report["figures"]["fake_a"]["value"] is None


def test_a_failing_bench_is_not_measured_and_the_others_still_run(tmp_path):
    report, status = _run(tmp_path, {
        "raises": (f"{FAKE}:raises", ["fake_a", "fake_b"], 60),
        "crashes": (f"{FAKE}:crashes", ["fake_c"], 60),
        "missing": ("tests.support.no_such_bench", ["fake_d"], 60),
        "partial": (f"{FAKE}:partial", ["fake_one", "fake_two"], 60),
        "good": (f"{FAKE}:good", ["fake_rate"], 60),
    })
    assert status == 1
    figures = report["figures"]
    for name in ("fake_a", "fake_b", "fake_c", "fake_d", "fake_two", "fake_bad"):
        assert figures[name]["value"] is None, name
        assert figures[name]["note"].startswith("not measured"), name
    assert "RuntimeError: the fake bench broke" in figures["fake_a"]["note"]
    assert "exited 3" in figures["fake_c"]["note"]
    assert "ModuleNotFoundError" in figures["fake_d"]["note"]
    assert "did not report it" in figures["fake_two"]["note"]
    assert figures["fake_one"]["value"] == 1.0
    assert figures["fake_rate"]["value"] == 12.5  # ran after the failures


def test_a_bench_past_its_limit_is_stopped_and_not_measured(tmp_path):
    report, status = _run(tmp_path, {"slow": (f"{FAKE}:sleeps", ["fake_slow"], 1)})
    assert status == 1
    assert "past its limit" in report["figures"]["fake_slow"]["note"]


def test_the_command_line_names_unknown_benches(capsys):
    import pytest

    with pytest.raises(SystemExit):
        runner.main(["no_such"])
    assert "unknown bench no_such" in capsys.readouterr().err
