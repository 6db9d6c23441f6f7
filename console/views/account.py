"""Account: the profile and quotas, the API key, the Matrix id and notices, the webhook and
its secret, the login sessions, and the user's data (its export, the account's deletion),
each through the same services as the API."""

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from accounts import credentials, quotas, selectors, services, verification
from accounts.serializers import (
    AccountDeleteInput,
    EmailChangeInput,
    MatrixIdInput,
    NotificationsInput,
    PasswordChangeInput,
    PasswordConfirmInput,
)
from console.forms import (
    AccountDeleteForm,
    EmailChangeForm,
    MailNoticesForm,
    MatrixIdForm,
    NotificationsForm,
    PasswordChangeForm,
    PasswordConfirmForm,
    WebhookForm,
)
from console.signin import current_session, signed_in
from console.views.common import form_page, next_page, posted
from core.clientip import client_ip
from core.errors import ApplicationError, RateLimited
from core.fields import validated
from mail.links import public_base_url
from matrix import services as matrix_services
from webhooks import selectors as webhook_selectors
from webhooks import services as webhook_services
from webhooks.serializers import WebhookInput

QUOTA_WORDS = {
    "calls_per_day": "Calls in the last 24 hours",
    "call_seconds_per_day": "Seconds of calls in the last 24 hours",
    "concurrent_calls": "Calls up at once",
}
MATRIX_WORDS = {
    "none": "No Matrix id, or Matrix is off here: nothing is sent.",
    "invited": "The bot has invited you to a direct room: join it to get notices.",
    "joined": "You are in the bot's room: it sends you notices and reads your commands.",
    "left": "You left the bot's room: nothing is sent. Set the id again for a new invite.",
}


@signed_in
def account(request):
    user = request.user
    counted = quotas.quotas_of(user, now=timezone.now())
    context = {
        "quotas": [(QUOTA_WORDS[quota.name], quota) for quota in counted],
        "api_key_end": (user.api_key or "")[-4:],
        "matrix_words": MATRIX_WORDS.get(user.matrix_status, user.matrix_status),
        "webhook": webhook_selectors.webhook_of(user=user),
        "mail_notices_form": MailNoticesForm(initial=_mail_notices(user)),
        "require_verification": settings.REQUIRE_EMAIL_VERIFICATION,
        "sessions": selectors.sessions_newest(user=user),
        "two_factor": selectors.two_factor_enabled(user=user),
        "two_factor_pending": selectors.two_factor_pending(user=user) is not None,
        "recovery_codes_left": selectors.recovery_codes_left(user=user),
    }
    return render(request, "console/account.html", context)


@signed_in
@require_http_methods(["GET", "POST"])
def password_change(request):
    """The API's password change: the login rate limit, then the service, which ends every
    other sign-in (this browser's stays) and mails the owner."""
    form = PasswordChangeForm(posted(request))

    def change():
        user = request.user
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=user.email)
        values = validated(PasswordChangeInput, form.values("currentPassword", "newPassword"))
        credentials.user_password_change(
            user=user,
            current_password=values["currentPassword"],
            new_password=values["newPassword"],
            keep=request.login_session,
            base_url=public_base_url(request),
        )
        messages.success(request, "Your password is changed. Every other sign-in has ended.")
        return redirect("console:account")

    return form_page(request, "console/password_change.html", form, change)


def api_key_page(request, api_key: str, *, why: str = "", then: str = ""):
    """The one page that shows the API key in full: never cached (relay.middleware's list
    holds its URLs), and the key never in a message (the Django session)."""
    context = {"api_key": api_key, "why": why, "then": then}
    return render(request, "console/api_key_shown.html", context)


@signed_in
@require_http_methods(["GET", "POST"])
def api_key_regenerate(request):
    if request.method == "POST":
        api_key = services.user_api_key_regenerate(user=request.user)
        return api_key_page(
            request, api_key, why="Your API key is replaced: the old one is refused from now on."
        )
    return render(request, "console/api_key_regenerate.html")


@signed_in
@require_http_methods(["GET", "POST"])
def api_key_reveal(request):
    """The key in full, once the password is typed again (counted toward the login rate
    limit, as the API's password checks are); the account page shows only its end."""
    form = PasswordConfirmForm(posted(request))

    def reveal():
        user = request.user
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=user.email)
        values = validated(PasswordConfirmInput, form.values("password"))
        return api_key_page(
            request, services.api_key_reveal(user=user, password=values["password"])
        )

    return form_page(request, "console/api_key_reveal.html", form, reveal)


@signed_in
def api_key_new(request):
    """The first sign-in after a password reset lands here: the key the reset made, shown
    this once (accounts.services.api_key_unseen_take), then on to where the sign-in went."""
    then = next_page(request, reverse("console:numbers"))
    api_key = services.api_key_unseen_take(user=request.user)
    if api_key is None:
        return redirect(then)
    why = (
        "Your password was reset, so your API key was replaced: here is the new one, shown "
        "this once. Programs that use the old key are refused until you give them this one."
    )
    return api_key_page(request, api_key, why=why, then=then)


# --- e-mail verification and change of address (accounts.verification) ------------------------
@signed_in
@require_http_methods(["GET", "POST"])
def email_change(request):
    """Move the account to another address: the password, counted toward the login rate limit
    as PUT /api/user/email counts it; the change waits for the new address's link."""
    form = EmailChangeForm(posted(request))

    def change():
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=request.user.email)
        values = validated(EmailChangeInput, form.values("email", "password"))
        user = verification.user_email_change(
            user=request.user,
            email=values["email"],
            password=values["password"],
            base_url=public_base_url(request),
        )
        messages.success(
            request,
            f"We mailed a link to {user.email_pending}: your account moves there once you "
            f"open it. {user.email} is told of the change.",
        )
        return redirect("console:account")

    return form_page(request, "console/email_change.html", form, change)


@signed_in
@require_POST
def verification_resend(request):
    """The banner's "Send the link again" (POST /api/user/verify-email/resend's service and
    rate limit); back to the page it was pressed on, with a notice of what happened."""
    try:
        verification.verification_resend(user=request.user, base_url=public_base_url(request))
    except ApplicationError as refusal:
        messages.error(request, refusal.message)
    else:
        address = request.user.email_pending or request.user.email
        messages.success(request, f"We mailed the link again to {address}.")
    return redirect(next_page(request, reverse("console:account")))


@signed_in
@require_http_methods(["GET", "POST"])
def matrix_id(request):
    """Two forms on one page, told apart by the button pressed: the Matrix id, and the
    notices' switches (which never touch the id, so never ask its homeserver)."""
    user = request.user
    sent = posted(request)
    switching = sent is not None and sent.get("save") == "notifications"
    matrix_form = MatrixIdForm(
        None if switching else sent, initial={"matrixId": user.matrix_id or ""}
    )
    notifications_form = NotificationsForm(
        sent if switching else None,
        initial={"matrixInbound": user.matrix_inbound, "matrixOutbound": user.matrix_outbound},
    )
    context = {
        "matrix_form": matrix_form,
        "notifications_form": notifications_form,
        "matrix_words": MATRIX_WORDS.get(user.matrix_status, user.matrix_status),
    }

    def set_id():
        values = validated(MatrixIdInput, matrix_form.values())
        changed = matrix_services.matrix_id_set(user=user, matrix_id=values["matrixId"])
        if changed.matrix_id:
            messages.success(request, f"Your Matrix id is {changed.matrix_id}.")
        else:
            messages.success(request, "You have no Matrix id now.")
        return redirect("console:account")

    def switch():
        values = validated(
            NotificationsInput, notifications_form.values("matrixInbound", "matrixOutbound")
        )
        services.user_notifications_set(
            user=user,
            matrix_inbound=values.get("matrixInbound"),
            matrix_outbound=values.get("matrixOutbound"),
        )
        messages.success(request, "Your Matrix notices are saved.")
        return redirect("console:account")

    form, act = (notifications_form, switch) if switching else (matrix_form, set_id)
    return form_page(request, "console/matrix_id.html", form, act, **context)


MAIL_NOTICES = ("voicemailEmail", "attachAudio", "missedCallEmail")


def _mail_notices(user) -> dict:
    return {
        "voicemailEmail": user.voicemail_email,
        "attachAudio": user.attach_audio,
        "missedCallEmail": user.missed_call_email,
    }


@signed_in
@require_POST
def mail_notices(request):
    """The mail switches of the account page, through the API's serializer and service."""
    form = MailNoticesForm(request.POST)
    form.is_valid()  # checkboxes: any submission is valid
    values = validated(NotificationsInput, form.values(*MAIL_NOTICES))
    services.user_notifications_set(
        user=request.user,
        voicemail_email=values["voicemailEmail"],
        missed_call_email=values["missedCallEmail"],
        attach_audio=values["attachAudio"],
    )
    messages.success(request, "Your mail notices are saved.")
    return redirect(reverse("console:account") + "#mail-heading")


def secret_shown(request, endpoint, secret: str, *, status: int = 200):
    """The webhook's secret, in this answer only: never stored, never cached (the routes that
    answer it are in relay.middleware.NO_STORE_ROUTES)."""
    return render(
        request,
        "console/webhook_secret.html",
        {"webhook": endpoint, "secret": secret},
        status=status,
    )


@signed_in
@require_http_methods(["GET", "POST"])
def webhook(request):
    endpoint = webhook_selectors.webhook_of(user=request.user)
    initial = {"url": endpoint.url, "events": endpoint.events} if endpoint else {}
    form = WebhookForm(posted(request), initial=initial)

    def save():
        values = validated(WebhookInput, form.values())
        saved, secret = webhook_services.webhook_set(
            user=request.user, url=values["url"], events=values.get("events", [])
        )
        if secret is not None:
            return secret_shown(request, saved, secret, status=201)
        messages.success(request, f"Your events go to {saved.url}.")
        return redirect("console:account")

    return form_page(request, "console/webhook.html", form, save, webhook=endpoint)


@signed_in
@require_http_methods(["GET", "POST"])
def webhook_rotate(request):
    endpoint = webhook_selectors.webhook_access(user=request.user)
    if request.method == "POST":
        endpoint, secret = webhook_services.webhook_secret_rotate(user=request.user)
        return secret_shown(request, endpoint, secret)
    return render(request, "console/webhook_rotate.html", {"webhook": endpoint})


@signed_in
@require_http_methods(["GET", "POST"])
def webhook_delete(request):
    endpoint = webhook_selectors.webhook_access(user=request.user)
    if request.method == "POST":
        webhook_services.webhook_delete(user=request.user)
        messages.success(request, "Your webhook is removed, with its secret.")
        return redirect("console:account")
    return render(request, "console/webhook_delete.html", {"webhook": endpoint})


@signed_in
@require_POST
def session_end(request, session_id):
    services.session_end_for_user(user=request.user, session_id=session_id)
    if current_session(request) is None:  # it was this browser's own: signed out
        request.session.flush()
        return redirect("console:login")
    messages.success(request, "The session is ended: its sign-in works no more.")
    return redirect("console:account")


@signed_in
@require_POST
def account_export(request):
    """The zip of everything Relay keeps of the user, as `GET /api/user/export` answers it: a
    POST (a form's button, CSRF-checked), since each export is costly and rate limited."""
    try:
        archive = services.user_export_archive(user=request.user)
    except RateLimited as error:
        minutes = -(-error.retry_after // 60)
        messages.error(
            request,
            "You downloaded your data a moment ago. "
            f"Try again in {minutes} minute{'' if minutes == 1 else 's'}.",
        )
        return redirect("console:account")
    return FileResponse(
        archive,
        as_attachment=True,
        filename=services.user_export_filename(),
        content_type="application/zip",
    )


@signed_in
@require_http_methods(["GET", "POST"])
def account_delete(request):
    """Delete the account, as `DELETE /api/user/me` does, confirmed with the password (and
    the second factor's code where one is enrolled); the browser is signed out."""
    second_factor = selectors.two_factor_enabled(user=request.user)
    form = AccountDeleteForm(posted(request), second_factor=second_factor)

    def delete():
        names = ("password", "otp") if second_factor else ("password",)
        values = validated(AccountDeleteInput, form.values(*names))
        services.user_delete(
            user=request.user,
            password=values["password"],
            otp=values.get("otp"),
            ip=client_ip(request),
        )
        request.session.flush()
        messages.success(request, "Your account is deleted, with everything Relay kept of it.")
        return redirect("console:login")

    return form_page(request, "console/account_delete.html", form, delete)
