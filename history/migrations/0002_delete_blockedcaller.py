"""BlockedCaller now belongs to the numbers app (its migration 0002 renamed the table):
history only forgets the model."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("history", "0001_initial"),
        ("numbers", "0002_blockedcaller"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="BlockedCaller")],
        ),
    ]
