from django.apps import AppConfig

TIMELINE_LAYER = "timeline"


class AgentSessionsConfig(AppConfig):
    # django.contrib.sessions owns the label "sessions".
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The timeline fans out through Redis pub/sub: one PUBLISH per event, delivered once
        # per process and dispatched in memory to that process's websocket consumers. Lost
        # messages are harmless: the stored timeline is replayed on (re)connect and gaps are
        # filled from the database.
        from django.conf import settings

        layers = settings.CHANNEL_LAYERS
        if TIMELINE_LAYER not in layers and "default" in layers:
            hosts = layers["default"].get("CONFIG", {}).get("hosts") or [settings.REDIS_URL]
            layers[TIMELINE_LAYER] = {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": hosts},
            }
