"""The outbox handlers, one per effect kind (registered on app start).

Each handler is idempotent per effect id: the id is the idempotency key of every send.
Kinds whose executor is not wired yet have no handler, so their rows wait visibly in the
admin instead of being dropped.
"""
