"""A stand-in app whose second check raises, for tests/integration/test_ops_doctor.py."""
from amux_common.doctor import Check, Probe


def _explodes():
    "é".encode("ascii")  # what a non-ASCII key used to do deep inside an HTTP client


def checks():
    yield Check("stand-in:first", True, "fine")
    yield Probe("stand-in:broken", _explodes)
    yield Probe("stand-in:third", lambda: Check("stand-in:third", True, "fine too"))
