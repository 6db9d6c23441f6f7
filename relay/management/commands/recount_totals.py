"""`manage.py recount_totals`: recount the counters behind `total` of /api/history and
/api/calls from the rows, correct any that drifted, and say which."""

from django.core.management.base import BaseCommand

from accounts.models import User
from history.services import call_record_counters_recount
from realtime.services import call_counters_recount


class Command(BaseCommand):
    help = (
        "Recount the history and call counters from the rows and correct any drift "
        "(safe while Relay runs)."
    )

    def handle(self, *args, **options):
        corrected = {
            "history": call_record_counters_recount(),
            "calls": call_counters_recount(),
        }
        owners = {d.key["owner_id"] for drift in corrected.values() for d in drift}
        emails = dict(User.objects.filter(pk__in=owners).values_list("pk", "email"))
        for kind, drift in corrected.items():
            for d in sorted(drift, key=lambda d: [str(v) for v in d.key.values()]):
                owner = d.key["owner_id"]
                where = ", ".join(
                    f"{k.removesuffix('_id')} {v}" for k, v in d.key.items() if k != "owner_id"
                )
                self.stdout.write(
                    f"{kind}: owner {owner} ({emails.get(owner, 'deleted')}), {where}: "
                    f"counted {d.counted}, rows {d.rows} ({d.rows - d.counted:+d})"
                )
        summary = ", ".join(f"{len(drift)} {kind} counter(s)" for kind, drift in corrected.items())
        if owners:
            self.stdout.write(f"Corrected {summary} of {len(owners)} owner(s).")
        else:
            self.stdout.write("No drift: every counter matches its rows.")
