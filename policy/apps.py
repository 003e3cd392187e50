from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "policy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from policy import services
        from prompts_app import service as prompts

        prompts.set_policy_provider(services.prompt_part)
