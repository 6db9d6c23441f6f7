from django.urls import path

from console.views import account, auth, calls, history, number_settings, numbers, two_factor

app_name = "console"

urlpatterns = [
    path("", auth.home, name="home"),
    path("login", auth.login, name="login"),
    path("login/code", auth.login_code, name="login_code"),
    path("register", auth.register, name="register"),
    path("logout", auth.logout, name="logout"),
    path("password-reset", auth.password_reset, name="password_reset"),
    path("password-reset/sent", auth.password_reset_sent, name="password_reset_sent"),
    # The token is a secret: the access log redacts a path argument named `token`.
    path(
        "password-reset/<str:token>",
        auth.password_reset_confirm,
        name="password_reset_confirm",
    ),
    path("verify-email/<str:token>", auth.verify_email, name="verify_email"),
    path("invitations/<str:token>", numbers.invitation, name="invitation"),
    # Numbers
    path("numbers", numbers.number_list, name="numbers"),
    path("numbers/new", numbers.number_create, name="number_create"),
    path("numbers/<str:number_id>/alias", numbers.number_alias, name="number_alias"),
    path("numbers/<str:number_id>/pin", numbers.number_pin, name="number_pin"),
    path("numbers/<str:number_id>/delete", numbers.number_delete, name="number_delete"),
    path("numbers/<str:number_id>/members", numbers.members, name="members"),
    path("numbers/<str:number_id>/notices", numbers.shared_notices, name="shared_notices"),
    path(
        "numbers/<str:number_id>/members/<str:member_id>/remove",
        numbers.member_remove,
        name="member_remove",
    ),
    # Blocklist, forwarding, greeting and opening hours
    path("numbers/<str:number_id>/blocked", number_settings.blocklist, name="blocklist"),
    path(
        "numbers/<str:number_id>/blocked/remove",
        number_settings.blocked_remove,
        name="blocked_remove",
    ),
    path("numbers/<str:number_id>/forwarding", number_settings.forwarding, name="forwarding"),
    path(
        "numbers/<str:number_id>/forwarding/clear",
        number_settings.forwarding_clear,
        name="forwarding_clear",
    ),
    path("numbers/<str:number_id>/greeting", number_settings.greeting, name="greeting"),
    path(
        "numbers/<str:number_id>/greeting/recording",
        number_settings.greeting_recording,
        name="greeting_recording",
    ),
    path(
        "numbers/<str:number_id>/greeting/recording/remove",
        number_settings.greeting_recording_remove,
        name="greeting_recording_remove",
    ),
    path("numbers/<str:number_id>/ringing", number_settings.ringing, name="ringing"),
    path("numbers/<str:number_id>/hours", number_settings.hours, name="hours"),
    path("numbers/<str:number_id>/hours/clear", number_settings.hours_clear, name="hours_clear"),
    path(
        "numbers/<str:number_id>/hours/closed-greeting",
        number_settings.closed_greeting_recording,
        name="closed_greeting_recording",
    ),
    path(
        "numbers/<str:number_id>/hours/closed-greeting/remove",
        number_settings.closed_greeting_recording_remove,
        name="closed_greeting_recording_remove",
    ),
    path("numbers/<str:number_id>/hold-music", number_settings.hold_music, name="hold_music"),
    path(
        "numbers/<str:number_id>/hold-music/file",
        number_settings.hold_music_file,
        name="hold_music_file",
    ),
    path(
        "numbers/<str:number_id>/hold-music/remove",
        number_settings.hold_music_remove,
        name="hold_music_remove",
    ),
    path(
        "numbers/<str:number_id>/recording",
        number_settings.call_recording,
        name="call_recording",
    ),
    # History
    path("history", history.history_list, name="history"),
    path("history/<str:record_id>", history.history_record, name="history_record"),
    path("history/<str:record_id>/recording", history.recording, name="recording"),
    path("history/<str:record_id>/heard", history.recording_heard, name="recording_heard"),
    path("history/<str:record_id>/delete", history.recording_delete, name="recording_delete"),
    path("call-recordings/<str:recording_id>", history.call_recording, name="call_recording_file"),
    path(
        "call-recordings/<str:recording_id>/delete",
        history.call_recording_delete,
        name="call_recording_delete",
    ),
    # Calls
    path("calls", calls.call_list, name="calls"),
    path("calls/socket-token", calls.socket_token, name="socket_token"),
    path("calls/status", calls.call_statuses, name="call_statuses"),
    path("calls/<path:call_id>/cancel", calls.call_cancel, name="call_cancel"),
    # Account
    path("account", account.account, name="account"),
    path("account/password", account.password_change, name="password_change"),
    path("account/api-key", account.api_key_regenerate, name="api_key_regenerate"),
    path("account/api-key/reveal", account.api_key_reveal, name="api_key_reveal"),
    path("account/api-key/new", account.api_key_new, name="api_key_new"),
    path("account/email", account.email_change, name="email_change"),
    path(
        "account/verify-email/resend",
        account.verification_resend,
        name="verification_resend",
    ),
    path("account/matrix", account.matrix_id, name="matrix_id"),
    path("account/mail-notices", account.mail_notices, name="mail_notices"),
    path("account/webhook", account.webhook, name="webhook"),
    path("account/webhook/rotate", account.webhook_rotate, name="webhook_rotate"),
    path("account/webhook/delete", account.webhook_delete, name="webhook_delete"),
    path("account/2fa", two_factor.two_factor, name="two_factor"),
    path("account/2fa/start", two_factor.two_factor_start, name="two_factor_start"),
    path("account/2fa/disable", two_factor.two_factor_disable, name="two_factor_disable"),
    path("account/sessions/<str:session_id>/end", account.session_end, name="session_end"),
    path("account/export", account.account_export, name="account_export"),
    path("account/delete", account.account_delete, name="account_delete"),
]
