"""`manage.py amux run|status|stop|doctor|token|user` — everything an operator runs."""

from __future__ import annotations

import os
import secrets
import shlex
import socket
import sys
from datetime import UTC, datetime

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from amux_site import operations

ADMIN_USERNAME = "admin"
# Worker processes per queue. `runtime` tasks mostly wait on agent processes.
CONCURRENCY = {"default": 2, "runtime": 4}
# Seconds honcho waits after SIGTERM before SIGKILL (Celery's warm shutdown lets the
# tasks in hand finish; acks_late re-delivers any that are killed).
KILL_WAIT = 20


class Command(BaseCommand):
    help = "Operate amux: run, status, stop, doctor, token, user."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("run", help="migrate, then serve with workers and beat (Ctrl-C stops)")
        sub.add_parser("status", help="exit 0 healthy, 1 down, 2 degraded, 3 stopped on purpose")
        sub.add_parser("stop", help="stop a running `amux run` on purpose (status then says 3)")
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

    def handle(self, *args, action, **options):
        return getattr(self, f"do_{action}")(**options)

    # -- status / stop ------------------------------------------------------------------

    def _exit(self, code: int, line: str):
        if line:
            (self.stdout if code == 0 else self.stderr).write(line)
        sys.stdout.flush()
        sys.exit(code)

    def do_status(self, **options):
        self._exit(*operations.status(settings.DATA_DIR, _host_header()))

    def do_stop(self, **options):
        self._exit(*operations.stop(settings.DATA_DIR))

    # -- doctor / token -----------------------------------------------------------------

    def do_doctor(self, **options):
        from amux_site import doctor

        checks = doctor.run()
        for check in checks:
            self.stdout.write(doctor.format_line(check))
        if any(c.required and not c.ok for c in checks):
            raise CommandError("a required check failed", returncode=1)

    def do_token(self, user, **options):
        from amux_site import accounts

        try:
            token = accounts.new_token(user)
        except accounts.AccountError as exc:
            raise CommandError(str(exc), returncode=1) from None
        self.stdout.write(token)

    def do_user(self, user_action, name, role, password_file=None, **options):
        from amux_site import accounts

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

    # -- run ----------------------------------------------------------------------------

    def do_run(self, **options):
        data_dir = settings.DATA_DIR
        try:
            lock = operations.acquire_lock(data_dir)
        except operations.AlreadyRunning as exc:
            raise CommandError(str(exc), returncode=1) from None
        try:
            port = _port()
            operations.clear_stopped(data_dir)
            self.stdout.write(f"amux: data directory {data_dir}")
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("amux: database migrated")
            self._ensure_admin()
            code = self._supervise(data_dir, port)
        finally:
            operations.clear_state(data_dir)
            lock.close()
        if code:
            raise CommandError("a process exited on its own; everything was stopped",
                               returncode=code)

    def _ensure_admin(self):
        from django.contrib.auth import get_user_model

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
        from django.db import connections
        from honcho.printer import Printer

        from amux_site import embedded_redis

        env = os.environ.copy()
        env.pop("AMUX_EMBEDDED_REDIS", None)
        # AMUX_URL: where workers' tools reach this server (kept if the operator set it).
        env.setdefault("AMUX_URL", f"http://127.0.0.1:{port}")
        env.update(AMUX_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1",
                   DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE",
                                                         "amux_site.settings"))
        manager = honcho.manager.Manager(Printer(sys.stdout))
        honcho.manager.KILL_WAIT = KILL_WAIT
        python = shlex.quote(sys.executable)
        host = socket.gethostname()
        cwd = str(settings.BASE_DIR)

        if settings.REDIS_EMBEDDED:
            if embedded_redis.running_url(data_dir):
                # A server an earlier management command started for this data directory:
                # replace it by one that lives and dies with this run.
                embedded_redis.stop(data_dir)
            redis_port = embedded_redis.free_port()
            env["REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
            argv = embedded_redis.server_args(redis_port, data_dir)
            manager.add_process("redis", "exec " + shlex.join(argv), env=env, cwd=cwd)
            # Other processes of this data directory (manage.py, status) attach to it.
            embedded_redis.record(data_dir, os.getpid(), redis_port)
        else:
            env["REDIS_URL"] = settings.REDIS_URL

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
            f"{celery} worker -l INFO -Q default -n {shlex.quote('default@' + host)} "
            f"-c {CONCURRENCY['default']} --without-mingle --without-gossip",
            env=env, cwd=cwd,
        )
        manager.add_process(
            "runtime",
            f"{celery} worker -l INFO -Q {shlex.quote(f'runtime,runtime.{host}')} "
            f"-n {shlex.quote('runtime@' + host)} -c {CONCURRENCY['runtime']} "
            "--without-mingle --without-gossip",
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
        operations.write_state(
            data_dir, pid=os.getpid(), port=port,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self.stdout.write(f"amux: serving http://127.0.0.1:{port}/panel/ (Ctrl-C stops)")
        sys.stdout.flush()
        connections.close_all()
        hung_up = _stop_on_hangup(manager)
        try:
            manager.loop()
        finally:
            if settings.REDIS_EMBEDDED:
                embedded_redis.forget(data_dir, os.getpid())
        # Ctrl-C (130), SIGTERM (143) and a closed terminal are the clean ways to stop.
        return 0 if manager.returncode in (130, 143) or hung_up else 1


def _stop_on_hangup(manager) -> list:
    """A closed terminal (SIGHUP) stops everything like Ctrl-C instead of orphaning the
    children (they run in sessions of their own, so the hangup never reaches them).

    honcho's helper processes are forked from this one and inherit the handler; it acts
    only in the process that installed it. Returns a list that is non-empty once it fired.
    """
    import signal

    owner, fired = os.getpid(), []

    def hangup(signum, frame):
        if os.getpid() != owner or fired:
            return
        fired.append(signum)
        print("amux: terminal closed (SIGHUP); stopping", flush=True)
        manager.terminate()

    signal.signal(signal.SIGHUP, hangup)
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
