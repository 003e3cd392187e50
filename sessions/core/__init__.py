"""The rules of sessions, pure: no Django, no I/O, no clock."""
