from django.urls import URLPattern, path

from console.views import account, auth, calls, history, number_settings, numbers, two_factor

app_name = "console"


def page(route: str, view) -> URLPattern:
    """A page named as its view: the name templates and redirects reverse is the view's."""
    return path(route, view, name=view.__name__)


def number_page(route: str, view) -> URLPattern:
    """A page of one number, below numbers/<number_id>/, named as its view."""
    return page(f"numbers/<str:number_id>/{route}", view)


urlpatterns = [
    page("", auth.home),
    page("login", auth.login),
    page("login/code", auth.login_code),
    page("register", auth.register),
    page("logout", auth.logout),
    page("password-reset", auth.password_reset),
    page("password-reset/sent", auth.password_reset_sent),
    # The token is a secret: the access log redacts a path argument named `token`.
    page("password-reset/<str:token>", auth.password_reset_confirm),
    page("verify-email/<str:token>", auth.verify_email),
    page("invitations/<str:token>", numbers.invitation),
    # Numbers
    path("numbers", numbers.number_list, name="numbers"),
    page("numbers/new", numbers.number_create),
    number_page("alias", numbers.number_alias),
    number_page("pin", numbers.number_pin),
    number_page("delete", numbers.number_delete),
    number_page("members", numbers.members),
    number_page("notices", numbers.shared_notices),
    number_page("members/<str:member_id>/remove", numbers.member_remove),
    # Blocklist, forwarding, greeting and opening hours
    number_page("blocked", number_settings.blocklist),
    number_page("blocked/remove", number_settings.blocked_remove),
    number_page("forwarding", number_settings.forwarding),
    number_page("forwarding/clear", number_settings.forwarding_clear),
    number_page("greeting", number_settings.greeting),
    number_page("greeting/recording", number_settings.greeting_recording),
    number_page("greeting/recording/remove", number_settings.greeting_recording_remove),
    number_page("ringing", number_settings.ringing),
    number_page("hours", number_settings.hours),
    number_page("hours/clear", number_settings.hours_clear),
    number_page("hours/closed-greeting", number_settings.closed_greeting_recording),
    number_page("hours/closed-greeting/remove", number_settings.closed_greeting_recording_remove),
    number_page("hold-music", number_settings.hold_music),
    number_page("hold-music/file", number_settings.hold_music_file),
    number_page("hold-music/remove", number_settings.hold_music_remove),
    number_page("recording", number_settings.call_recording),
    # History
    path("history", history.history_list, name="history"),
    page("history/<str:record_id>", history.history_record),
    page("history/<str:record_id>/recording", history.recording),
    page("history/<str:record_id>/heard", history.recording_heard),
    page("history/<str:record_id>/delete", history.recording_delete),
    path("call-recordings/<str:recording_id>", history.call_recording, name="call_recording_file"),
    page("call-recordings/<str:recording_id>/delete", history.call_recording_delete),
    # Calls
    path("calls", calls.call_list, name="calls"),
    page("calls/socket-token", calls.socket_token),
    page("calls/status", calls.call_statuses),
    page("calls/<path:call_id>/cancel", calls.call_cancel),
    # Account
    page("account", account.account),
    page("account/password", account.password_change),
    page("account/api-key", account.api_key_regenerate),
    page("account/api-key/reveal", account.api_key_reveal),
    page("account/api-key/new", account.api_key_new),
    page("account/email", account.email_change),
    page("account/verify-email/resend", account.verification_resend),
    page("account/matrix", account.matrix_id),
    page("account/mail-notices", account.mail_notices),
    page("account/webhook", account.webhook),
    page("account/webhook/rotate", account.webhook_rotate),
    page("account/webhook/delete", account.webhook_delete),
    page("account/2fa", two_factor.two_factor),
    page("account/2fa/start", two_factor.two_factor_start),
    page("account/2fa/disable", two_factor.two_factor_disable),
    page("account/sessions/<str:session_id>/end", account.session_end),
    page("account/export", account.account_export),
    page("account/delete", account.account_delete),
]
