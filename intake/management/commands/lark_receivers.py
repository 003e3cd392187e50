"""`python manage.py lark_receivers`: one Lark long-connection receiver per enabled source
set to receive by long connection, kept in step with the panel (`amux run` starts it)."""

from django.core.management.base import BaseCommand, CommandError

from intake import lark_receiver


class Command(BaseCommand):
    help = ("Supervise a long-connection receiver (`lark_receiver --source SLUG`) for each "
            "enabled Lark source whose receiver is long_connection; reconciles every few "
            "seconds and stops them all on SIGTERM or Ctrl-C.")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=5.0,
                            help="seconds between reconciliations (default 5)")

    def handle(self, *args, interval, **options):
        if not 0 < interval <= 3600:
            raise CommandError("--interval must be between 0 and 3600 seconds")

        def out(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        lark_receiver.supervise(interval=interval, out=out)
