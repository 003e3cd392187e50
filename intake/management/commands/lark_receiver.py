"""`python manage.py lark_receiver --source SLUG`: Lark's long connection, one process."""

from django.core.management.base import BaseCommand, CommandError

from intake import lark_receiver
from intake.models import Source


class Command(BaseCommand):
    help = "Receive a Lark source's events over lark-oapi's long connection (blocks)."

    def add_arguments(self, parser):
        parser.add_argument("--source", required=True, help="slug of a lark source")

    def handle(self, *args, source, **options):
        if not Source.objects.filter(slug=source, kind="lark").exists():
            raise CommandError(f"no lark source {source!r}")
        lark_receiver.run(source)
