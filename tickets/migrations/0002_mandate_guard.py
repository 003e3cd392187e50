"""A mandate is written once: the database itself refuses UPDATE (and on PostgreSQL DELETE).

SQLite has no TRUNCATE, so a DELETE trigger there would also refuse the test runner's
flush; on SQLite deletes are refused by the model and its queryset instead."""

from django.db import migrations

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION tickets_mandate_immutable() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'a mandate cannot be changed once written' USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER tickets_mandate_no_update BEFORE UPDATE OR DELETE ON tickets_mandate
  FOR EACH ROW EXECUTE FUNCTION tickets_mandate_immutable();
"""
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS tickets_mandate_no_update ON tickets_mandate;
DROP FUNCTION IF EXISTS tickets_mandate_immutable();
"""
SQLITE_UP = [
    """CREATE TRIGGER tickets_mandate_no_update BEFORE UPDATE ON tickets_mandate
       BEGIN SELECT RAISE(ABORT, 'a mandate cannot be changed once written'); END;""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS tickets_mandate_no_update;",
    "DROP TRIGGER IF EXISTS tickets_mandate_no_delete;",
]


def _run(schema_editor, statements):
    for statement in statements:
        schema_editor.execute(statement)


def up(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, [POSTGRES_UP])
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_UP)


def down(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, [POSTGRES_DOWN])
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_DOWN)


class Migration(migrations.Migration):
    dependencies = [("tickets", "0001_initial")]
    operations = [migrations.RunPython(up, down)]
