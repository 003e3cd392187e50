from django.apps import AppConfig

TIMELINE_LAYER = "timeline"


class AgentSessionsConfig(AppConfig):
    # django.contrib.sessions owns the label "sessions".
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import events
        from effects.models import EffectKind
        from sessions import task_runs

        # a task run takes the outcome of its turn (stated with the terminal event)
        events.subscribe(EffectKind.TURN_ENDED, task_runs.SUBSCRIBER,
                         wants=task_runs.wants_turn_end)(task_runs.turn_ended)

        # The timeline fans out through Redis pub/sub: one PUBLISH per event, received once
        # per process and session (sessions.fanout) and handed in memory to that process's
        # websocket consumers. Lost messages are harmless: the stored timeline is replayed on
        # (re)connect and gaps are filled from the database. Pub/sub channels are not
        # scoped to a Redis database, so their names carry its number: two installations
        # on one Redis server with different databases never see each other's events.
        from django.conf import settings
        from redis.connection import parse_url

        layers = settings.CHANNEL_LAYERS
        if TIMELINE_LAYER not in layers and "default" in layers:
            hosts = layers["default"].get("CONFIG", {}).get("hosts") or [settings.REDIS_URL]
            db = parse_url(settings.REDIS_URL).get("db", 0)
            layers[TIMELINE_LAYER] = {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": hosts, "prefix": f"amux-db{db}"},
            }
