"""Outbound calls now live in the call ledger (calls.Call, CallEvent, Recording, CallCounter,
issue 54): a last sync (calls' 0002), then realtime's tables go, in one transaction, so
whatever the release before this one wrote since the first copy reaches the ledger too."""

from importlib import import_module

from django.db import migrations


def sync(apps, schema_editor):
    import_module("calls.migrations.0002_outbound_calls_moved").sync(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("realtime", "0009_browser_calls"),
        ("calls", "0002_outbound_calls_moved"),
        ("telephony", "0005_dial_legs_of_ledger_calls"),
    ]

    operations = [
        migrations.RunPython(sync, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel(name="CallEvent"),
        migrations.DeleteModel(name="CallRecording"),
        migrations.DeleteModel(name="CallRequestCounter"),
        migrations.DeleteModel(name="CallRequest"),
    ]
