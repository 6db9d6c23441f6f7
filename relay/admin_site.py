from datetime import timedelta

from django.contrib import admin
from django.db.models import Count
from django.utils import timezone

from core.passwords import hashes_passwords_on_post


class RelayAdminSite(admin.AdminSite):
    """Django admin with the service's state at a glance on the index page."""

    site_header = "Relay administration"
    site_title = "Relay admin"
    index_title = "Service state"
    index_template = "admin/relay_index.html"

    def index(self, request, extra_context=None):
        return super().index(request, {**(extra_context or {}), "relay": service_state()})

    # The login form is open to anyone and checks a password; the password change form
    # checks the old one and hashes the new. Both take a hashing slot like the API's login.
    @hashes_passwords_on_post
    def login(self, request, extra_context=None):
        return super().login(request, extra_context)

    @hashes_passwords_on_post
    def password_change(self, request, extra_context=None):
        return super().password_change(request, extra_context)


def service_state() -> dict:
    """What staff want first: how many users and numbers, and how calls went in 24 hours."""
    from accounts.models import User
    from history.models import CallRecord
    from realtime.models import CallRequest, CallState
    from virtual_numbers.selectors import inventory_counts

    since = timezone.now() - timedelta(hours=24)
    outbound = dict(
        CallRequest.objects.filter(created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    inbound = dict(
        CallRecord.objects.filter(created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    failed = list(
        CallRequest.objects.filter(status=CallState.FAILED, created_at__gte=since)
        .select_related("owner")
        .order_by("-created_at")[:10]
    )
    return {
        "users": User.objects.count(),
        "numbers": inventory_counts(),
        "outbound": [(label, outbound.get(value, 0)) for value, label in CallState.choices],
        "inbound": inbound,
        "failed": failed,
        "failed_total": outbound.get(CallState.FAILED, 0),
    }
