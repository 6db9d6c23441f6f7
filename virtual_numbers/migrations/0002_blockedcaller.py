"""BlockedCaller moves here from history (it is a rule of the number, served under
/api/numbers/:id/blocked). The rows stay: the table is renamed, the model only changes app."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("numbers", "0001_initial"),
        ("history", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE history_blockedcaller RENAME TO numbers_blockedcaller",
                    reverse_sql="ALTER TABLE numbers_blockedcaller RENAME TO history_blockedcaller",
                ),
            ],
            state_operations=[
                migrations.CreateModel(
                    name="BlockedCaller",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("caller_num", models.CharField(max_length=16)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "number",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="blocked_callers",
                                to="numbers.number",
                            ),
                        ),
                    ],
                    options={
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("number", "caller_num"),
                                name="blockedcaller_unique_per_number",
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
