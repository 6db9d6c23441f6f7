from django.db import migrations, models


def verify_existing(apps, schema_editor):
    # Accounts made before addresses were verified are taken as verified: an upgrade with
    # REQUIRE_EMAIL_VERIFICATION=true must lock no one out of their numbers and calls.
    apps.get_model("accounts", "User").objects.update(email_verified=True)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_totp_device_and_recovery_codes"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="email_verified",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="user",
            name="email_pending",
            field=models.EmailField(blank=True, db_default="", default="", max_length=254),
        ),
        migrations.RunPython(verify_existing, migrations.RunPython.noop, elidable=True),
    ]
