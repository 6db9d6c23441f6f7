"""The history is a read of the call ledger (history.records, issue 54): a last sync (0009),
then history's tables go, in one transaction, so whatever the release before this one wrote
since the first copy reaches the ledger too. The transcription slots stay: they name the call
whose message they transcribe."""

from importlib import import_module

from django.db import migrations, models


def sync(apps, schema_editor):
    import_module("history.migrations.0009_records_moved").sync(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("history", "0009_records_moved")]

    operations = [
        migrations.RunPython(sync, migrations.RunPython.noop, elidable=False),
        migrations.AlterField(
            model_name="transcriptionslot",
            name="record",
            field=models.UUIDField(blank=True, help_text="the call whose message it is", null=True),
        ),
        migrations.DeleteModel(name="CallRecord"),
        migrations.DeleteModel(name="CallRecordCounter"),
    ]
