from django.apps import AppConfig


class IntakeConfig(AppConfig):
    name = "intake"
    label = "intake"
    verbose_name = "Intake"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from effects import outbox
        from intake import acks, process, record
        from intake.sources import check_capabilities

        outbox.register(acks.ACK_EFFECT)(acks.reply_and_ack)
        outbox.register(record.RETRY_EFFECT)(process.retry_mailbox)

        check_capabilities()  # a plugin that claims a capability it lacks stops start-up
