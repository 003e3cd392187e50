"""A stand-in app with a `doctor.py`, installed by tests/integration/test_ops_doctor.py."""
