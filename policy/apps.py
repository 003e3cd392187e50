from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "policy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import outbox
        from effects.models import EffectKind
        from policy import services
        from prompts_app import service as prompts

        outbox.register(EffectKind.POLICY_APPLY)(services.apply_effect)  # a saved version
        prompts.policy_part.provide(services.prompt_part)  # the policy part of each prompt
        prompts.policy_reading.provide(services.prompt_reading)  # … of each model request
