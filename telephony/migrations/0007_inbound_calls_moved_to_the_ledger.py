"""Inbound calls and legs now live in the call ledger (calls.Call, calls.Leg, issue 54): a
last sync (0006), then telephony's tables go, in one transaction, so whatever the release
before this one wrote since the first copy reaches the ledger too."""

from importlib import import_module

from django.db import migrations


def sync(apps, schema_editor):
    import_module("telephony.migrations.0006_inbound_calls_moved").sync(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("telephony", "0006_inbound_calls_moved")]

    operations = [
        migrations.RunPython(sync, migrations.RunPython.noop, elidable=False),
        migrations.RemoveField(model_name="inboundcall", name="number"),
        migrations.DeleteModel(name="ForwardLeg"),
        migrations.DeleteModel(name="InboundCall"),
    ]
