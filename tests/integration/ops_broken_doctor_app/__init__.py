"""A stand-in app whose `doctor.py` raises, for tests/integration/test_ops_doctor.py."""
