"""`manage.py amux run|status|stop|restart|backup|restore|upgrade|doctor|token|user|task`
— everything an operator runs (`--version`: amux's version)."""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import socket
import sys
import threading
import time
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from honcho.printer import Printer

from amux_common import metrics
from amux_site import (
    accounts,
    backup,
    db_pool,
    doctor,
    embedded_redis,
    operations,
    restore,
    runtimes_install,
    session_paths,
)
from amux_site.logs import JsonLines, json_printer
from amux_site.supervisor import CrashPolicy, Supervisor
from amux_site.version import version
from execution import cli_input, schedule_cli, task_cli
from sessions.services import CommandError as Refused

ADMIN_USERNAME = "admin"
# Worker processes of the `default` queue. The `runtime` worker is one process with a thread
# per awake session (settings.AMUX_SESSION_CAPACITY of them; sessions/capacity.py).
CONCURRENCY = {"default": 2}
# The `default` worker (intake processing, the outbox, triage) runs at this lower CPU
# priority: when the machine is busy, a webhook, the panel and the API are answered first
# and background work waits its turn (bench/ingest.py: p99 of signed deliveries while the
# worker processes them). It changes nothing on an idle machine. Session hosts (`runtime`)
# keep the normal priority: a turn's latency is someone's wait too.
BACKGROUND_NICE = 10
# Seconds honcho waits after SIGTERM before SIGKILL (Celery's warm shutdown lets the
# tasks in hand finish; acks_late re-delivers any that are killed).
KILL_WAIT = 20
# What `_supervise` returns when `amux restart` asked for a new start in place.
RESTART = -1


class Command(BaseCommand):
    help = ("Operate amux: run, status, stop, restart, backup, restore, upgrade, doctor, "
            "token, user.")

    def get_version(self):
        return version()

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("run", help="migrate, then serve with workers and beat (Ctrl-C stops)")
        status = sub.add_parser(
            "status", help="exit 0 healthy, 1 down, 2 degraded, 3 stopped on purpose")
        status.add_argument(
            "--respect-stop", action="store_true",
            help="leave a deliberate stop alone (3, not 1); plain `status` already does, "
                 "this spelling is accepted for watchdog scripts that pass it")
        sub.add_parser("stop", help="stop a running `amux run` on purpose")
        restart = sub.add_parser(
            "restart", help="stop the running `amux run` and start it again in its place")
        restart.add_argument("--timeout", type=float, default=120.0,
                             help="seconds to wait until it is healthy again (default 120)")
        backup = sub.add_parser("backup", help="a consistent copy of the database; prints "
                                               "the file it wrote")
        backup.add_argument("--to", dest="to", default=None,
                            help="directory for the copy (default DATA_DIR/backups)")
        restore = sub.add_parser(
            "restore", help="put a backup from `amux backup` back as the database of this "
                            "stopped installation (the database as it was is kept as a "
                            "backup first); refuses one made by a newer amux")
        restore.add_argument("file", help="the .sqlite3 or .pgdump file `amux backup` wrote")
        upgrade = sub.add_parser(
            "upgrade", help="after updating the code: wait until no turn runs, back up, "
                            "migrate, restart")
        upgrade.add_argument("--timeout", type=float, default=600.0,
                             help="seconds to wait for running turns to end (default 600)")
        sub.add_parser("doctor", help="one line per check; non-zero exit if a required one fails")
        token = sub.add_parser("token", help="print a new REST API token for a user")
        token.add_argument("--user", required=True, help="username")
        user = sub.add_parser("user", help="manage panel and API accounts")
        user_sub = user.add_subparsers(dest="user_action", required=True, metavar="ACTION")
        user_add = user_sub.add_parser(
            "add", help="create an account; prints a generated password once unless "
                        "--password-file is given")
        user_add.add_argument("name", help="user name")
        user_add.add_argument("--role", required=True, choices=["viewer", "operator"],
                              help="viewer reads everything; operator also changes things")
        user_add.add_argument("--password-file", help="read the password from this file's "
                                                      "first line")
        task_cli.add_parser(sub)  # `amux task submit ...`
        schedule_cli.add_parser(sub)  # `amux schedule add ...`

    def handle(self, *args, action, **options):
        return getattr(self, f"do_{action}")(**options)

    # -- status / stop ------------------------------------------------------------------

    def _exit(self, code: int, line: str):
        if line:
            (self.stdout if code == 0 else self.stderr).write(line)
        sys.stdout.flush()
        sys.exit(code)

    def do_status(self, respect_stop=False, **options):
        self._exit(*operations.status(settings.DATA_DIR, _host_header(),
                                      respect_stop=respect_stop))

    def do_stop(self, **options):
        self._exit(*operations.stop(settings.DATA_DIR))

    def do_restart(self, timeout=120.0, **options):
        self._exit(*operations.restart(settings.DATA_DIR, _host_header(), timeout=timeout))

    # -- backup / upgrade ---------------------------------------------------------------

    def do_backup(self, to=None, **options):
        try:
            path = backup.backup(to)
        except backup.BackupError as exc:
            raise CommandError(str(exc), returncode=1) from None
        self.stdout.write(str(path))

    def do_restore(self, file, **options):
        if operations.is_running(settings.DATA_DIR):
            raise CommandError("amux is running: stop it first (`amux stop`), then restore",
                               returncode=1)
        try:
            restore.restore(file, self.stdout.write)
        except restore.RestoreError as exc:
            raise CommandError(f"{exc}; nothing was changed", returncode=1) from None

    def do_upgrade(self, timeout=600.0, **options):
        running = backup.wait_for_no_running_turns(timeout, self.stdout.write)
        if running:
            raise CommandError(
                f"{running} turn(s) still running after {timeout:.0f} s; nothing was changed "
                "(try again later or with a longer --timeout)", returncode=1)
        try:
            path = backup.backup(None)
        except backup.BackupError as exc:
            raise CommandError(f"backup failed, nothing was changed: {exc}",
                               returncode=1) from None
        self.stdout.write(f"amux: backed up to {path} (an older amux cannot open the "
                          "migrated database: roll back with this copy)")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("amux: database migrated")
        if not operations.is_running(settings.DATA_DIR):
            self.stdout.write("amux: not running; `make run` starts the new version")
            return
        code, line = operations.restart(settings.DATA_DIR, _host_header())
        self._exit(code, line)

    # -- doctor / token -----------------------------------------------------------------

    def do_doctor(self, **options):
        checks = doctor.run()
        for check in checks:
            self.stdout.write(doctor.format_line(check))
        if any(c.required and not c.ok for c in checks):
            raise CommandError("a required check failed", returncode=1)

    def do_token(self, user, **options):
        try:
            token = accounts.new_token(user)
        except accounts.AccountError as exc:
            raise CommandError(str(exc), returncode=1) from None
        self.stdout.write(token)

    def do_user(self, user_action, name, role, password_file=None, **options):
        try:
            password = (accounts.read_password_file(password_file)
                        if password_file else None)
            generated = accounts.add_user(name, role, password)
        except accounts.AccountError as exc:
            raise CommandError(str(exc), returncode=1) from None
        if generated:
            self.stdout.write(f"amux: created {role} {name!r}, password: {generated}\n"
                              "amux: (shown this once; only its hash is kept)")
        else:
            self.stdout.write(f"amux: created {role} {name!r} with the password from "
                              f"{password_file}")

    def do_task(self, task_action, **options):
        try:
            code = task_cli.submit(self.stdout.write, **options)
        except cli_input.InputRefused as exc:
            raise CommandError(str(exc), returncode=1) from None
        except Refused as exc:
            field = f"{exc.field}: " if exc.field else ""
            raise CommandError(f"{field}{exc}", returncode=1) from None
        if code:
            sys.exit(code)

    # -- schedule -----------------------------------------------------------------------

    def do_schedule(self, schedule_action, **options):
        import json

        try:
            lines = schedule_cli.run(schedule_action, options)
        except schedule_cli.CliError as exc:
            raise CommandError(str(exc), returncode=1) from None
        for line in lines:
            self.stdout.write(line if isinstance(line, str) else json.dumps(line, default=str))

    # -- run ----------------------------------------------------------------------------

    def do_run(self, **options):
        data_dir = settings.DATA_DIR
        if settings.LOG_FORMAT == "json":
            self.stdout = OutputWrapper(JsonLines(sys.stdout))
        try:
            lock = operations.acquire_lock(data_dir)
        except operations.AlreadyRunning as exc:
            raise CommandError(str(exc), returncode=1) from None
        try:
            port = _port()
            operations.clear_stopped(data_dir)

            session_paths.make_private()  # not what sessions need (resumed ones too)
            self.stdout.write(f"amux: data directory {data_dir}")
            self._install_runtimes()
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("amux: database migrated")
            self._ensure_admin()
            code = self._supervise(data_dir, port)
        finally:
            operations.clear_state(data_dir)
            lock.close()
        if code == RESTART:
            self._reexec()
        if code:
            crashed = getattr(getattr(self, "manager", None), "crash_loop", None)
            raise CommandError(
                f"{crashed or 'a process'} kept exiting on its own (a crash loop); "
                "everything was stopped", returncode=code)

    def _install_runtimes(self):
        """After the lock: a second `make run` is refused before it touches the runtimes."""
        started = time.monotonic()
        outcome = runtimes_install.ensure()
        if outcome.state == "installed":
            self.stdout.write(f"amux: agent runtimes installed from package-lock.json "
                              f"({time.monotonic() - started:.0f} s)")
        elif outcome.state == "stale":
            self.stdout.write(f"amux: agent runtimes of an older package-lock.json kept "
                              f"({outcome.detail}); installing the new ones in the background")
            threading.Thread(target=runtimes_install.keep_trying, args=(self.stdout.write,),
                             name="runtimes-install", daemon=True).start()
        elif not outcome.ok:
            self.stdout.write(f"amux: agent runtimes not installed ({outcome.detail}); "
                              "starting without them, `amux doctor` lists what is missing")

    def _reexec(self):
        """`amux restart`: the same process (pid, terminal, process manager) runs the code
        now on disk. Python opens files close-on-exec, so the lock is free for it."""
        self.stdout.write("amux: restarting")
        sys.stdout.flush()
        sys.stderr.flush()
        env = os.environ.copy()
        if settings.REDIS_EMBEDDED:
            # settings published this run's embedded server; the next run starts its own
            env.pop("REDIS_URL", None)
        manage = str(settings.BASE_DIR / "manage.py")
        os.execve(sys.executable, [sys.executable, manage, "amux", "run"], env)

    def _ensure_admin(self):
        User = get_user_model()
        if User.objects.filter(username=ADMIN_USERNAME).exists():
            return
        given = os.environ.get("AMUX_ADMIN_PASSWORD")
        password = given or secrets.token_urlsafe(12)
        User.objects.create_superuser(ADMIN_USERNAME, email="", password=password)
        if given:
            self.stdout.write(f"amux: created operator account {ADMIN_USERNAME!r} with the "
                              "password from AMUX_ADMIN_PASSWORD")
        else:
            self.stdout.write(
                f"amux: created operator account {ADMIN_USERNAME!r}, password: {password}\n"
                "amux: (shown this once; change it at /admin/password_change/)"
            )

    def _supervise(self, data_dir, port: int) -> int:
        import honcho.manager

        env = _child_env(data_dir, port)
        printer = json_printer(sys.stdout) if settings.LOG_FORMAT == "json" else Printer(sys.stdout)
        manager = Supervisor(printer, CrashPolicy(limit=settings.AMUX_RUN_RESTART_LIMIT))
        self.manager = manager
        honcho.manager.KILL_WAIT = KILL_WAIT

        operations.reset_metrics(metrics.directory())  # before any child counts
        if settings.REDIS_EMBEDDED:
            _add_embedded_redis(manager, env, data_dir)
        else:
            env["REDIS_URL"] = settings.REDIS_URL
        _add_processes(manager, env, port)
        hung_up = _on_signal(manager, signal.SIGHUP, self.stdout.write,
                             "amux: terminal closed (SIGHUP); stopping")
        # before the state names this process: `amux restart` signals only after that
        restart = _on_signal(manager, operations.RESTART_SIGNAL, self.stdout.write,
                             "amux: restart requested; stopping")
        operations.write_state(
            data_dir, pid=os.getpid(), port=port, run_id=secrets.token_hex(8),
            started=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self.stdout.write(f"amux: serving http://127.0.0.1:{port}/panel/ (Ctrl-C stops)")
        sys.stdout.flush()
        # honcho forks its helpers from this process: they must inherit no pooled connection
        db_pool.close_all()
        try:
            manager.loop()
        finally:
            if settings.REDIS_EMBEDDED:
                embedded_redis.forget(data_dir, os.getpid())
        if restart:
            return RESTART
        # Ctrl-C (130), SIGTERM (143) and a closed terminal are the clean ways to stop.
        return 0 if manager.returncode in (130, 143) or hung_up else 1


def _child_env(data_dir, port: int) -> dict[str, str]:
    """The environment of every process `amux run` starts (REDIS_URL is added after)."""
    env = os.environ.copy()
    env.pop("AMUX_EMBEDDED_REDIS", None)
    # AMUX_URL: where workers' tools reach this server (kept if the operator set it).
    env.setdefault("AMUX_URL", f"http://127.0.0.1:{port}")
    env.update(AMUX_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE",
                                                     "amux_site.settings"))
    return env


def _add_embedded_redis(manager: Supervisor, env: dict[str, str], data_dir) -> None:
    """A Redis server of this run's own, named in `env` for the processes after it."""
    if embedded_redis.running_url(data_dir):
        # A server an earlier management command started for this data directory:
        # replace it by one that lives and dies with this run.
        embedded_redis.stop(data_dir)
    redis_port = embedded_redis.free_port()
    env["REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
    argv = embedded_redis.server_args(redis_port, data_dir)
    manager.add_process("redis", "exec " + shlex.join(argv), env=env,
                        cwd=str(settings.BASE_DIR))
    # Other processes of this data directory (manage.py, status) attach to it.
    embedded_redis.record(data_dir, os.getpid(), redis_port)


def _add_processes(manager: Supervisor, env: dict[str, str], port: int) -> None:
    """The web server, the two Celery workers, beat and the Lark receivers."""
    python = shlex.quote(sys.executable)
    host = socket.gethostname()
    cwd = str(settings.BASE_DIR)
    celery = f"exec {python} -m celery -A amux_site"
    manager.add_process(
        "web",
        f"exec {python} -m uvicorn amux_site.asgi:application --host 127.0.0.1 "
        f"--port {port} {shlex.join(operations.UVICORN_WS_ARGS)} --lifespan on "
        "--no-access-log",
        env=env, cwd=cwd,
    )
    manager.add_process(
        "default",
        f"exec nice -n {BACKGROUND_NICE} {python} -m celery -A amux_site worker -l INFO "
        f"-Q default -n {shlex.quote('default@' + host)} "
        f"-c {CONCURRENCY['default']} --without-mingle --without-gossip",
        env=env, cwd=cwd,
    )
    # its own queue is named as the leases name this machine (settings.AMUX_HOSTNAME)
    runtime_host = settings.AMUX_HOSTNAME
    manager.add_process(
        "runtime",
        f"{celery} worker -l INFO -Q {shlex.quote(f'runtime,runtime.{runtime_host}')} "
        f"-n {shlex.quote('runtime@' + runtime_host)} -P threads "
        f"-c {settings.AMUX_SESSION_CAPACITY} --without-mingle --without-gossip",
        env=env, cwd=cwd,
    )
    manager.add_process(
        "beat",
        f"{celery} beat -l INFO -s {shlex.quote(settings.CELERY_BEAT_SCHEDULE_FILENAME)}",
        env=env, cwd=cwd,
    )
    # Lark long connections: one receiver per enabled source that receives that way,
    # kept in step with the panel (idles while there is none).
    manager.add_process(
        "lark",
        f"exec {python} {shlex.quote(str(settings.BASE_DIR / 'manage.py'))} lark_receivers",
        env=env, cwd=cwd,
    )


def _on_signal(manager, signum: int, say, message: str) -> list:
    """Stop every child when `signum` arrives, like Ctrl-C.

    SIGHUP (a closed terminal) would otherwise orphan the children (they run in sessions
    of their own, so the hangup never reaches them); RESTART_SIGNAL is `amux restart`.
    honcho's helper processes are forked from this one and inherit the handler; it acts
    only in the process that installed it. Returns a list that is non-empty once it fired.
    """
    owner, fired = os.getpid(), []

    def handler(signum, frame):
        if os.getpid() != owner or fired:
            return
        fired.append(signum)
        say(message)
        sys.stdout.flush()
        manager.terminate()

    signal.signal(signum, handler)
    return fired


def _port() -> int:
    raw = os.environ.get("AMUX_PORT", "8000")
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise CommandError(f"AMUX_PORT must be a TCP port number (1-65535), not {raw!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise CommandError(
                f"port {port} on 127.0.0.1 is in use; set AMUX_PORT to a free port"
            ) from None
    return port


def _host_header() -> str:
    for host in settings.ALLOWED_HOSTS:
        if host not in {"*"} and not host.startswith("."):
            return host
    return "127.0.0.1"
