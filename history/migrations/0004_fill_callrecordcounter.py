"""Fill the new counters from the records already stored: one GROUP BY over the table.

Records written by a process still running the previous release after this runs are not
counted; `manage.py recount_totals` after the deploy corrects that (docs/operations.md).
"""

from django.db import migrations
from django.db.models import Count


def fill(apps, schema_editor):
    db = schema_editor.connection.alias
    record = apps.get_model("history", "CallRecord")
    counter = apps.get_model("history", "CallRecordCounter")
    groups = (
        record.objects.using(db)
        .values("owner_id", "number_id", "status")
        .annotate(rows=Count("pk"))
        .order_by()
    )
    counter.objects.using(db).bulk_create(
        (
            counter(
                owner_id=g["owner_id"],
                number_id=g["number_id"],
                status=g["status"],
                count=g["rows"],
            )
            for g in groups.iterator()
        ),
        batch_size=1000,
    )


class Migration(migrations.Migration):
    dependencies = [("history", "0003_callrecordcounter")]

    operations = [migrations.RunPython(fill, migrations.RunPython.noop)]
