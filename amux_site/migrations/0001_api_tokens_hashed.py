"""API tokens kept in clear by DRF's authtoken become knox tokens (only a digest kept), and
the clear table is dropped: programs keep working with the token they hold, and no token
can be read from the database any more."""

from datetime import UTC, datetime

from django.db import migrations

OLD_TABLE = "authtoken_token"


def hash_clear_tokens(apps, schema_editor):
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    AuthToken = apps.get_model("knox", "AuthToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {OLD_TABLE}")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        token = AuthToken(digest=hash_token(key), token_key=key[:CONSTANTS.TOKEN_KEY_LENGTH],
                          user_id=user_id, expiry=None)
        token.save()
        if isinstance(created, str):  # SQLite hands back text
            created = datetime.fromisoformat(created)
        if created is not None and created.tzinfo is None:
            created = created.replace(tzinfo=UTC)  # Django stores UTC
        AuthToken.objects.filter(pk=token.pk).update(created=created)  # auto_now_add
    schema_editor.execute(f"DROP TABLE {OLD_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("knox", "0009_extend_authtoken_field"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(hash_clear_tokens, migrations.RunPython.noop)]
