"""Fill the new counters from the calls already stored: one GROUP BY over the table.

Calls submitted or moved by a process still running the previous release after this runs
are not counted; `manage.py recount_totals` after the deploy corrects that
(docs/operations.md).
"""

from django.db import migrations
from django.db.models import Count


def fill(apps, schema_editor):
    db = schema_editor.connection.alias
    call = apps.get_model("realtime", "CallRequest")
    counter = apps.get_model("realtime", "CallRequestCounter")
    groups = (
        call.objects.using(db).values("owner_id", "status").annotate(rows=Count("pk")).order_by()
    )
    counter.objects.using(db).bulk_create(
        (
            counter(owner_id=g["owner_id"], status=g["status"], count=g["rows"])
            for g in groups.iterator()
        ),
        batch_size=1000,
    )


class Migration(migrations.Migration):
    dependencies = [("realtime", "0003_callrequestcounter")]

    operations = [migrations.RunPython(fill, migrations.RunPython.noop)]
