#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
    if sys.argv[1:2] == ["amux"]:
        # Operations commands never start an embedded Redis as a side effect: `amux run`
        # supervises its own, `status`/`doctor`/`stop`/`token` only attach to a running one.
        os.environ.setdefault("AMUX_EMBEDDED_REDIS", "attach")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
