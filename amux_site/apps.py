from django.apps import AppConfig


class AmuxSiteConfig(AppConfig):
    """The composition root as an app, so its management commands (`amux …`) are found."""

    name = "amux_site"
    verbose_name = "amux"

    def ready(self):
        from amux_site import log_redaction

        log_redaction.install()
