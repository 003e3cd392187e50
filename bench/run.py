"""Every benchmark in one go: `make bench` (or `python -m bench`), `make bench BENCH=name`.

Each bench runs in a child process of its own (each sets Django up its own way, on its own
scratch database) that imports `bench.<name>` and calls its `figures()`; the figures are
printed one line each with the goal and whether it is met, and written with the machine's
core count and load to var/bench/latest.json (each figure also with the 1-minute load when
its bench started); a run of some benches keeps the other benches' figures of the file.
A bench that fails, raises, has no `figures()`, or runs past its time limit leaves its
figures "not measured" with the reason (never a number) and the others still run; the exit
status is then 1.

Without DATABASE_URL the run starts the embedded PostgreSQL (bench/_db.py) once and stops
it after; without REDIS_URL the benches share the embedded Redis of AMUX_DATA_DIR
(var/bench by default), likewise stopped after if this run started it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "var" / "bench"

# name -> (module, the figures it must report, seconds it may take)
BENCHES: dict[str, tuple[str, list[str], int]] = {
    "gate": ("bench.gate", ["gate_per_s"], 120),
    "prompts": ("bench.prompts", ["prompt_current_roundtrips"], 180),
    "outbox": ("bench.outbox", ["outbox_ratio"], 480),
    "live_pass": ("bench.live_pass", ["live_pass_ratio"], 600),
    "ingest": ("bench.ingest", ["ingest_ratio", "ingest_ratio_plain", "ingest_p99_ms",
                                "ingest_rate_per_s"], 300),
    "turn_overhead": ("bench.turn_overhead", ["turn_added_ms_p50", "turn_added_ms_p95"], 600),
    "timeline": ("bench.timeline", ["timeline_p95_ms_1000"], 600),
    "sessions": ("bench.sessions",
                 ["session_rss_mb", "sleeping_session_processes", "wake_p95_ms",
                  "session_total_rss_mb_codex", "session_total_rss_mb_pi",
                  "sessions_awake_max_codex", "session_total_rss_mb_codex_process_each"], 900),
    "first_action": ("bench.first_action", ["first_action_p50_ms", "first_action_p95_ms"], 420),
    "burst": ("bench.burst", [f"first_action_burst_{k}_{r}" for r in ("codex", "pi")
                              for k in ("p95_ms", "ratio")], 900),
    "warm_pool": ("bench.warm_pool", ["warm_first_turn_p50_ms_pi",
                                      "warm_first_turn_ratio_pi"], 600),
    "gateway": ("bench.gateway", ["gateway_added_ms_p50", "gateway_added_ms_p95",
                                  "gateway_first_byte_added_ms_p50"], 300),
}


def not_measured(names: list[str], reason: str) -> dict[str, dict]:
    return {name: {"value": None, "unit": "", "goal": "", "met": None,
                   "note": f"not measured: {reason}"} for name in names}


def child(module: str, out: str) -> int:
    """In the child process: import the bench (`module`, or `module:function` for another
    function than figures), call it, write what it returned to `out`."""
    sys.path.insert(0, str(ROOT))
    import importlib

    module, _, function = module.partition(":")
    try:
        figures = getattr(importlib.import_module(module), function or "figures")
        result = {"figures": figures()}
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, none is fatal
        if isinstance(exc, KeyboardInterrupt):
            raise
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    Path(out).write_text(json.dumps(result))
    return 0


def run_one(name: str, module: str, expected: list[str], limit: float,
            env: dict[str, str], work_dir: Path = OUT_DIR) -> dict[str, dict]:
    """Run one bench in a child; its figures, or its expected ones as not measured."""
    work_dir.mkdir(parents=True, exist_ok=True)
    out, log = work_dir / f"{name}.result.json", work_dir / f"{name}.log"
    out.unlink(missing_ok=True)
    with open(log, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "bench.run", "--child", module, str(out)],
                                cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return not_measured(expected, f"{name} ran past its limit of {limit:.0f} s "
                                          f"(log {log})")
        _kill_group(proc)  # whatever it left behind (runtimes, servers)
    try:
        result = json.loads(out.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return not_measured(expected, f"{name} exited {proc.returncode} without figures: "
                                      + " | ".join(tail))
    if "error" in result:
        return not_measured(expected, f"{name} failed: {result['error']}")
    figures = {}
    reported = result["figures"]
    for fig_name, fig in (reported.items() if isinstance(reported, dict) else []):
        if isinstance(fig, dict) and "value" in fig and (
                fig["value"] is None or isinstance(fig["value"], int | float)):
            figures[fig_name] = {"value": fig["value"], "unit": fig.get("unit", ""),
                                 "goal": fig.get("goal", ""), "met": fig.get("met"),
                                 **({"note": fig["note"]} if fig.get("note") else {})}
        else:
            figures.update(not_measured([fig_name], f"{name} reported {fig!r:.200}"))
    for missing in [n for n in expected if n not in figures]:
        figures.update(not_measured([missing], f"{name} did not report it"))
    return figures


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def line(name: str, fig: dict) -> str:
    if fig.get("value") is None:
        verdict, shown = "NOT MEASURED", "-"
    else:
        verdict = {True: "met", False: "MISSED", None: "(no goal)"}[fig.get("met")]
        value = fig["value"]
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
        shown = f"{shown} {fig.get('unit', '')}".strip()
    text = f"{name:32} {shown:>18}   goal {fig.get('goal') or '-':18} {verdict}"
    if fig.get("note"):
        text += f"  — {fig['note']}"
    return text


def run(names: list[str], benches=None, out_path: Path | None = None,
        services: bool = True) -> tuple[dict, int]:
    """Run the named benches; write and return the report and the exit status.
    `services`: start the embedded PostgreSQL and Redis when their URLs are not set."""
    benches = BENCHES if benches is None else benches
    out_path = out_path or OUT_DIR / "latest.json"
    env = {**os.environ, "AMUX_DATA_DIR": os.environ.get("AMUX_DATA_DIR",
                                                         str(OUT_DIR))}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    sys.path.insert(0, str(ROOT))
    from bench._setup import BENCH_POOL, remove_runtime_users

    env.setdefault("AMUX_RUNTIME_POOL", BENCH_POOL)
    started_pg = started_redis = False
    setup_notes = []
    if services and not env.get("DATABASE_URL"):
        sys.path.insert(0, str(ROOT))
        from bench import _db

        try:
            was_running = _db.embedded_url() is not None
            env["DATABASE_URL"] = _db.start_embedded()
            started_pg = not was_running
        except _db.NoPostgres as exc:
            setup_notes.append(str(exc))  # each bench that needs it says so
    if services and not env.get("REDIS_URL"):
        from amux_site import embedded_redis

        data_dir = Path(env["AMUX_DATA_DIR"])
        started_redis = embedded_redis.running_url(data_dir) is None
        env["REDIS_URL"] = embedded_redis.ensure(data_dir)
    report = {"machine": {"cores": os.cpu_count(), "load": list(os.getloadavg())},
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "database": "DATABASE_URL" if os.environ.get("DATABASE_URL")
              else "embedded" if env.get("DATABASE_URL") else "none", "figures": {}}
    for note in setup_notes:
        print(f"note: {note}", flush=True)
    if set(names) != set(benches):
        # some benches: the others' figures stay as the last run measured them
        report["figures"] = {n: f for n, f in _previous(out_path).items()
                             if f.get("bench") in set(benches) - set(names)}
    try:
        for name in names:
            module, expected, limit = benches[name]
            print(f"… {name} (log {out_path.parent / name}.log)", flush=True)
            began, at = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            load = round(os.getloadavg()[0], 2)
            figures = run_one(name, module, expected, limit, env, out_path.parent)
            for fig_name, fig in figures.items():
                report["figures"][fig_name] = {**fig, "bench": name, "at": at, "load": load}
                print("  " + line(fig_name, fig), flush=True)
            print(f"  ({time.monotonic() - began:.0f} s)", flush=True)
    finally:
        report["machine"]["load_after"] = list(os.getloadavg())
        remove_runtime_users(env["AMUX_RUNTIME_POOL"])
        if started_pg:
            from bench import _db

            _db.stop_embedded()
        if started_redis:
            from amux_site import embedded_redis

            embedded_redis.stop(Path(env["AMUX_DATA_DIR"]))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    missing = [n for n, f in report["figures"].items()
               if f.get("value") is None and f.get("bench") in names]
    print(f"wrote {out_path}; {len(report['figures'])} figures, "
          f"{len(missing)} not measured" + (f": {', '.join(missing)}" if missing else ""))
    return report, 1 if missing else 0


def _previous(path: Path) -> dict[str, dict]:
    try:
        return json.loads(path.read_text()).get("figures", {})
    except (OSError, ValueError, AttributeError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("benches", nargs="*", help=f"some of: {', '.join(BENCHES)}")
    parser.add_argument("--child", nargs=2, metavar=("MODULE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    names = [n for arg in args.benches for n in arg.split(",") if n] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown bench {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    return run(names)[1]


if __name__ == "__main__":
    sys.exit(main())
