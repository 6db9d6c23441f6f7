from django.conf import settings
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from accounts import credentials, selectors, services, twofactor, verification
from accounts.models import LoginSession
from accounts.serializers import (
    AccountDeleteInput,
    ApiKeyOutput,
    AuthOutput,
    CredentialsInput,
    DashboardOutput,
    EmailChangeInput,
    EmailChangeOutput,
    MeOutput,
    NotificationsInput,
    NotificationsOutput,
    PasswordChangeInput,
    PasswordConfirmInput,
    PasswordResetConfirmInput,
    PasswordResetInput,
    RecoveryCodesOutput,
    RegisterInput,
    RingPhoneInput,
    RingPhoneOutput,
    TwoFactorConfirmInput,
    TwoFactorDisableInput,
    TwoFactorEnrolmentOutput,
    VerifyEmailInput,
)
from accounts.wsurl import ws_base_url
from core import ratelimit
from core.clientip import client_ip
from core.errors import ErrorCode, InvalidRequest
from core.passwords import hashes_passwords
from core.schema import SUCCESS_EXAMPLE, SuccessOutput, operation, success_operation
from core.viewsets import JsonErrorsOnly, ResourceViewSet
from mail.links import public_base_url

USER_ID = "9b2f6c1e-3d4a-4b8e-9f10-2a3b4c5d6e7f"
SESSION_ID = "5f0c2d9a-8b7e-4c61-a3d2-1e0f9a8b7c6d"
API_KEY = "vr_Xq3nV8kP2mL7sR4tY9wB1cF6hJ0dG5aZ2eN8uQ4i"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzaWQiOiI1ZjBjIn0.c2lnbmF0dXJl"
AUTH_EXAMPLE = {"token": JWT, "user": {"id": USER_ID, "email": "me@example.com", "apiKey": API_KEY}}
VERIFY_TOKEN = "9b2f6c1e3d4a4b8e9f102a3b4c5d6e7f.cd2x4k-5f0c2d9a8b7e4c61a3d21e0f9a8b7c6d"
CREDENTIALS_EXAMPLE = {"email": "me@example.com", "password": "a-long-passphrase"}
TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
ENROLMENT_EXAMPLE = {
    "secret": TOTP_SECRET,
    "otpauthUri": f"otpauth://totp/Relay:me%40example.com?secret={TOTP_SECRET}&issuer=Relay",
    "qrSvg": '<svg xmlns="http://www.w3.org/2000/svg" width="196" height="196" class="segno">'
    '<title>QR code of the second factor\'s secret</title><path d="M4 4.5h7"/></svg>',
}
RECOVERY_CODES_EXAMPLE = {
    "recoveryCodes": [
        "7kq2-mx4p-a9dr-t3wz",
        "h6cn-2vby-p8ks-x4qe",
        "r3tf-9mza-w5hc-k2nu",
        "b8xd-4pqv-m6ry-e9ta",
        "s2wk-7fhn-c3zb-u5mp",
        "n9ea-3rtx-q7dv-y4kc",
        "f5mu-8kcz-t2pw-h6rb",
        "x4vq-6ybe-k9sn-a3fd",
        "c7pt-5hwr-z2ma-n8ux",
        "w3yd-9eqk-r4fc-t6bv",
    ]
}
OTP_RATE_LIMIT_DESCRIPTION = (
    "Wrong codes are rate limited per user (`RATE_LIMIT_OTP_PER_USER`, wrong codes at login "
    "count too): past it, 429 with `Retry-After`, even for a right code."
)
AUTH_RATE_LIMIT_DESCRIPTION = (
    "Rate limited per client IP (`RATE_LIMIT_AUTH_PER_IP`) and per e-mail "
    "(`RATE_LIMIT_AUTH_PER_EMAIL`): 429 with `Retry-After`."
)


def session_opening(
    operation_id: str,
    *,
    summary: str,
    description: str,
    input_serializer,
    status_code: int,
    errors: list[ErrorCode],
):
    """An action open to everyone (no credentials) that opens a login session from an e-mail
    and a password: rate limited, it answers the JWT and the user (AuthOutput)."""

    def decorate(view):
        view = action(
            detail=False, methods=["post"], authentication_classes=[], permission_classes=[AllowAny]
        )(view)
        return hashes_passwords(
            operation(
                operation_id,
                summary=summary,
                description=f"{description} {AUTH_RATE_LIMIT_DESCRIPTION}",
                request=(input_serializer, CREDENTIALS_EXAMPLE),
                responses={status_code: (AuthOutput, AUTH_EXAMPLE)},
                errors=[*errors, ErrorCode.RATE_LIMITED, ErrorCode.SERVICE_UNAVAILABLE],
                authenticated=False,
            )(view)
        )

    return decorate


class AuthViewSet(ResourceViewSet):
    # `/api/auth/*`: register and log in (open to everyone), log out (the current session).

    input_serializers = {
        "register": RegisterInput,
        "login": CredentialsInput,
        "password_reset": PasswordResetInput,
        "password_reset_confirm": PasswordResetConfirmInput,
        "verify_email": VerifyEmailInput,
    }

    def _open_session(self, scope: str, service, status_code: int) -> Response:
        """Rate-limit by IP and e-mail before anything else, then validate and call `service`
        (register or login), answering the token and the user."""
        request = self.request
        data = request.data if isinstance(request.data, dict) else {}
        services.auth_rate_limit(scope=scope, ip=client_ip(request), email=data.get("email", ""))
        result = service(**self.validated())
        return self.answer(AuthOutput, result, status=status_code)

    @session_opening(
        "auth_register",
        summary="Register an account",
        description="Opens a login session: the answer carries its JWT and the API key.",
        input_serializer=RegisterInput,
        status_code=status.HTTP_201_CREATED,
        errors=[ErrorCode.EMAIL_TAKEN, ErrorCode.REGISTRATION_CLOSED],
    )
    def register(self, request):
        services.registration_check()  # before anything else: a closed door says only that

        def register(**values):
            return services.user_register(**values, base_url=public_base_url(request))

        return self._open_session("register", register, status.HTTP_201_CREATED)

    @session_opening(
        "auth_login",
        summary="Log in",
        description="Opens a new login session. An account with a second factor also needs "
        "`otp`, a code of its authenticator app (each accepted once) or one of its recovery "
        "codes (each works once); it is asked for only once the password is found right: "
        "401 `otp_required` without it, 401 `otp_invalid` for a wrong or used one. "
        "Wrong codes are also rate limited per user (`RATE_LIMIT_OTP_PER_USER`).",
        input_serializer=CredentialsInput,
        status_code=status.HTTP_200_OK,
        errors=[ErrorCode.INVALID_CREDENTIALS, ErrorCode.OTP_REQUIRED, ErrorCode.OTP_INVALID],
    )
    def login(self, request):
        return self._open_session("login", services.user_login, status.HTTP_200_OK)

    @success_operation(
        "auth_logout",
        summary="End the current login session",
        description="Its JWT is refused from then on and its open sockets close (4401). "
        "An API key has no session: 400.",
        errors=[ErrorCode.INVALID_REQUEST],
    )
    @action(detail=False, methods=["post"])
    def logout(self, request):
        if not isinstance(request.auth, LoginSession):
            raise InvalidRequest(
                "An API key has no session to end; regenerate the key to revoke it."
            )
        services.session_end(session=request.auth)
        return self.succeeded()

    @operation(
        "auth_password_reset",
        summary="Ask for a password reset link",
        description="Mails a single-use link, valid for 30 minutes, to the account with this "
        "address, if there is one. The answer, and about its time, are the same whether or not "
        "an account has the address. Rate limited per client IP "
        "(`RATE_LIMIT_PASSWORD_RESET_PER_IP`) and per address "
        "(`RATE_LIMIT_PASSWORD_RESET_PER_EMAIL`): 429 with `Retry-After`.",
        request=(PasswordResetInput, {"email": "me@example.com"}),
        responses={202: (SuccessOutput, SUCCESS_EXAMPLE)},
        errors=[ErrorCode.RATE_LIMITED],
        authenticated=False,
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="password-reset",
        authentication_classes=[],
        permission_classes=[AllowAny],
    )
    def password_reset(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        credentials.password_reset_rate_limit(ip=client_ip(request), email=data.get("email", ""))
        values = self.validated()
        credentials.password_reset_request(email=values["email"], base_url=public_base_url(request))
        return self.answer(SuccessOutput, None, status=status.HTTP_202_ACCEPTED)

    @hashes_passwords
    @operation(
        "auth_password_reset_confirm",
        summary="Set a new password with a reset link's token",
        description="The token is the last part of the mailed link's path. It works once, "
        "for 30 minutes, and dies with any change of the password. Every session of the "
        "account ends, and the API key is replaced (the next login answers the new one; the "
        "console shows it once at its next sign-in). Rate limited per client IP "
        "(`RATE_LIMIT_AUTH_PER_IP`): 429 with `Retry-After`.",
        request=(
            PasswordResetConfirmInput,
            {
                "token": "9b2f6c1e3d4a4b8e9f102a3b4c5d6e7f.cz7k1h-4f0e9d8c7b6a5f4e3d2c1b0a",
                "newPassword": "another-long-passphrase",
            },
        ),
        responses={204: (None, None)},
        errors=[
            ErrorCode.RESET_TOKEN_INVALID,
            ErrorCode.RATE_LIMITED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
        authenticated=False,
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="password-reset/confirm",
        authentication_classes=[],
        permission_classes=[AllowAny],
    )
    def password_reset_confirm(self, request):
        credentials.password_reset_confirm_rate_limit(ip=client_ip(request))
        values = self.validated()
        credentials.password_reset_confirm(
            token=values["token"],
            new_password=values["newPassword"],
            base_url=public_base_url(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    # --- e-mail verification (accounts.verification) -------------------------------------------
    @operation(
        "auth_verify_email",
        summary="Confirm your e-mail address",
        description="The token is the last part of the link mailed at sign-up, on a change of "
        "address or on request (`/verify-email/<token>`). It works once, for "
        "`EMAIL_VERIFICATION_HOURS`, and dies when the address changes. A pending change of "
        "address takes effect here; should another account have taken the address meanwhile, "
        "409 `email_taken`. No credentials needed: the token is one. Rate limited per client "
        "IP (`RATE_LIMIT_AUTH_PER_IP`): 429 with `Retry-After`.",
        request=(VerifyEmailInput, {"token": VERIFY_TOKEN}),
        responses={204: (None, None)},
        errors=[ErrorCode.VERIFICATION_INVALID, ErrorCode.EMAIL_TAKEN, ErrorCode.RATE_LIMITED],
        authenticated=False,
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="verify-email",
        authentication_classes=[],
        permission_classes=[AllowAny],
    )
    def verify_email(self, request):
        ratelimit.hit("verify-email:ip", client_ip(request), settings.RATE_LIMIT_AUTH_PER_IP)
        verification.email_verify(token=self.validated()["token"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class UserViewSet(ResourceViewSet):
    # `/api/user/*`: the caller's profile, password, Matrix id and API key.

    # The actions whose user arrives with its profile (quota use, second factor) read by the
    # authentication's own query (accounts.authentication.profile_wanted): GET /me in one
    # database round trip.
    profile_actions = frozenset({"me"})
    input_serializers = {
        "notifications": NotificationsInput,
        "ring_phone_set": RingPhoneInput,
        "password": PasswordChangeInput,
        "me_delete": AccountDeleteInput,
        "email": EmailChangeInput,
        "two_factor": PasswordConfirmInput,
        "two_factor_confirm": TwoFactorConfirmInput,
        "two_factor_disable": TwoFactorDisableInput,
    }

    @hashes_passwords
    @operation(
        "user_password_change",
        summary="Change your password",
        description="Needs the current password; a wrong one counts toward the login rate "
        "limit (`RATE_LIMIT_AUTH_PER_IP`, `RATE_LIMIT_AUTH_PER_EMAIL`: 429 with "
        "`Retry-After`). Every other login session ends: its JWT is refused from then on and "
        "its sockets close (4401). Called with an API key, every session ends. The API key "
        "stays, unless `rotateApiKey` is true: then it is replaced too (the old one fails on "
        "the very next request; a session kept reads the new one from `GET /api/dashboard`). "
        "A mail tells you of the change.",
        request=(
            PasswordChangeInput,
            {
                "currentPassword": "a-long-passphrase",
                "newPassword": "another-long-passphrase",
                "rotateApiKey": False,
            },
        ),
        responses={204: (None, None)},
        errors=[ErrorCode.PASSWORD_MISMATCH, ErrorCode.RATE_LIMITED, ErrorCode.SERVICE_UNAVAILABLE],
    )
    @action(detail=False, methods=["post"])
    def password(self, request):
        user = request.user
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=user.email)
        values = self.validated()
        credentials.user_password_change(
            user=user,
            current_password=values["currentPassword"],
            new_password=values["newPassword"],
            keep=request.auth if isinstance(request.auth, LoginSession) else None,
            base_url=public_base_url(request),
            rotate_api_key=values["rotateApiKey"],
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @operation(
        "user_me",
        summary="Read your profile",
        responses={
            200: (
                MeOutput,
                {
                    "id": USER_ID,
                    "email": "me@example.com",
                    "plan": "free",
                    "matrixId": "@me:matrix.example.com",
                    "matrixStatus": "joined",
                    "matrixInbound": True,
                    "matrixOutbound": True,
                    "createdAt": 1795320000000,
                    "emailVerified": True,
                    "pendingEmail": None,
                    "quotas": {
                        "callsPerDay": {"limit": 50, "used": 3, "resetsAt": 1795323600000},
                        "callSecondsPerDay": {
                            "limit": 1800,
                            "used": 42,
                            "resetsAt": 1795323610000,
                        },
                        "concurrentCalls": {"limit": 3, "used": 1, "resetsAt": None},
                    },
                    "twoFactor": False,
                },
            )
        },
    )
    @action(detail=False, methods=["get"])
    def me(self, request):
        return self.answer(MeOutput, selectors.user_profile(user=request.user))

    @hashes_passwords
    @operation(
        "user_delete",
        summary="Delete your account",
        description="Confirmed with your password (and `otp`, a code of your second factor, "
        "where you enrolled one). In one go: your calls in progress end (`canceled`), your "
        "numbers go back to the inventory as deleted numbers do, your history, voicemail, "
        "calls, webhook and Matrix link are deleted, and every session ends (their sockets "
        "close with 4401, API-key sockets too). Only what fraud review must keep is kept "
        "(docs/operations.md). A wrong password is 403 `password_mismatch`; every attempt "
        "counts toward the login rate limits. With a second factor, a missing code is 401 "
        "`otp_required` and a wrong one 401 `otp_invalid`, counted toward "
        f"`RATE_LIMIT_OTP_PER_USER`. {AUTH_RATE_LIMIT_DESCRIPTION}",
        request=(AccountDeleteInput, {"password": "a-long-passphrase", "otp": "492039"}),
        responses={204: (None, None)},
        errors=[
            ErrorCode.OTP_REQUIRED,
            ErrorCode.OTP_INVALID,
            ErrorCode.PASSWORD_MISMATCH,
            ErrorCode.RATE_LIMITED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    @me.mapping.delete
    def me_delete(self, request):
        values = self.validated()
        services.user_delete(
            user=request.user,
            password=values["password"],
            otp=values.get("otp"),
            ip=client_ip(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @operation(
        "user_export",
        summary="Download all your data",
        description="A zip: `account.json` (your profile, sessions, refused calls, numbers "
        "with their forwarding and blocklist, history, calls and webhook, never a secret) "
        "and every voicemail message as `voicemail/<record id>.wav`, every recording of a "
        "call's script as `recordings/<recording id>.wav`. Rate limited "
        "(`RATE_LIMIT_EXPORT_PER_USER`): 429 with `Retry-After`. Errors are JSON whatever "
        "the Accept header asks for.",
        responses={(200, "application/zip"): (OpenApiTypes.BINARY, None)},
        errors=[ErrorCode.RATE_LIMITED],
    )
    @action(detail=False, methods=["get"], content_negotiation_class=JsonErrorsOnly)
    def export(self, request):
        archive = services.user_export_archive(user=request.user)
        return FileResponse(
            archive,
            as_attachment=True,
            filename=services.user_export_filename(),
            content_type="application/zip",
        )

    @operation(
        "user_notifications_set",
        summary="Choose which calls you are told about: by the Matrix bot, and by mail",
        description="Give any of the switches, or none (a read). The Matrix notices are on by "
        "default; the mail of a voicemail and of a missed call are off until you turn them "
        "on, and a voicemail's mail attaches its WAV (attachAudio, on by default) up to "
        "VOICEMAIL_EMAIL_MAX_MB. Mail goes only to a verified address where the service "
        "requires verification, and never about a blocked caller.",
        request=(
            NotificationsInput,
            {"matrixInbound": True, "voicemailEmail": True, "attachAudio": False},
        ),
        responses={
            200: (
                NotificationsOutput,
                {
                    "success": True,
                    "matrixInbound": True,
                    "matrixOutbound": False,
                    "voicemailEmail": True,
                    "missedCallEmail": False,
                    "attachAudio": False,
                },
            )
        },
    )
    @action(detail=False, methods=["put"])
    def notifications(self, request):
        values = self.validated()
        user = services.user_notifications_set(
            user=request.user,
            matrix_inbound=values.get("matrixInbound"),
            matrix_outbound=values.get("matrixOutbound"),
            voicemail_email=values.get("voicemailEmail"),
            missed_call_email=values.get("missedCallEmail"),
            attach_audio=values.get("attachAudio"),
        )
        return self.answer(NotificationsOutput, user)

    @operation(
        "user_ring_phone_get",
        summary="Read the phone rung with your console tabs",
        description="When a number's ring list names you (a member entry), your console tabs "
        "with Phone on ring, and this phone with them (docs/telephony.md, Ring groups).",
        responses={200: (RingPhoneOutput, {"ringPhone": "+441134960456"})},
    )
    @action(detail=False, methods=["get"], url_path="ring-phone")
    def ring_phone(self, request):
        return self.answer(RingPhoneOutput, request.user)

    @operation(
        "user_ring_phone_set",
        summary="Set the phone rung with your console tabs",
        description="null: your tabs only. A phone the dialing policy refuses is "
        "`destination_not_allowed`, nothing stored. Rate limited per user "
        "(`RATE_LIMIT_FORWARDING_PER_USER`, counted apart from forwarding).",
        request=(RingPhoneInput, {"ringPhone": "+441134960456"}),
        responses={200: (RingPhoneOutput, {"ringPhone": "+441134960456"})},
        errors=[ErrorCode.DESTINATION_NOT_ALLOWED, ErrorCode.RATE_LIMITED],
    )
    @ring_phone.mapping.put
    def ring_phone_set(self, request):
        phone = self.validated()["ringPhone"]
        user = services.user_ring_phone_set(user=request.user, phone=phone)
        return self.answer(RingPhoneOutput, user)

    @operation(
        "user_api_key_regenerate",
        summary="Replace your API key",
        description="The old key fails on the very next request.",
        responses={200: (ApiKeyOutput, {"apiKey": API_KEY})},
    )
    @action(detail=False, methods=["post"], url_path="regenerate-api-key")
    def regenerate_api_key(self, request):
        api_key = services.user_api_key_regenerate(user=request.user)
        return self.answer(ApiKeyOutput, {"apiKey": api_key})

    @hashes_passwords
    @operation(
        "user_two_factor_start",
        summary="Start turning on a second factor (TOTP)",
        description="Needs your current password (403 `password_mismatch`): a token alone "
        "cannot bind an authenticator to the account. Every attempt counts toward the login "
        "rate limit (`RATE_LIMIT_AUTH_PER_IP`, `RATE_LIMIT_AUTH_PER_EMAIL`: 429 with "
        "`Retry-After`). Answers a fresh secret, as text, as an `otpauth://` URI and as a QR "
        "code (SVG), for an authenticator app. The factor is not on until "
        "`POST /api/user/2fa/confirm`; starting again before that replaces the secret. "
        "409 `two_factor_on` while a factor is on.",
        request=(PasswordConfirmInput, {"password": "a-long-passphrase"}),
        responses={200: (TwoFactorEnrolmentOutput, ENROLMENT_EXAMPLE)},
        errors=[
            ErrorCode.PASSWORD_MISMATCH,
            ErrorCode.TWO_FACTOR_ON,
            ErrorCode.RATE_LIMITED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    @action(detail=False, methods=["post"], url_path="2fa")
    def two_factor(self, request):
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=request.user.email)
        values = self.validated()
        enrolment = twofactor.two_factor_start(user=request.user, password=values["password"])
        return self.answer(TwoFactorEnrolmentOutput, enrolment)

    @hashes_passwords
    @success_operation(
        "user_two_factor_disable",
        summary="Turn the second factor off",
        description="Needs the password and a code: one of the authenticator app, or a "
        "recovery code (which a lost phone leaves). The secret and the recovery codes are "
        "deleted. 409 `two_factor_off` when no factor is on. A wrong password (403 "
        "`password_mismatch`, as for a password change) counts as a wrong code. "
        f"{OTP_RATE_LIMIT_DESCRIPTION}",
        request=(TwoFactorDisableInput, {"password": "a-long-passphrase", "code": "123456"}),
        errors=[
            ErrorCode.PASSWORD_MISMATCH,
            ErrorCode.OTP_INVALID,
            ErrorCode.TWO_FACTOR_OFF,
            ErrorCode.RATE_LIMITED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    @two_factor.mapping.delete
    def two_factor_disable(self, request):
        values = self.validated()
        twofactor.two_factor_disable(
            user=request.user, password=values["password"], code=values["code"]
        )
        return self.succeeded()

    @operation(
        "user_two_factor_confirm",
        summary="Turn the second factor on",
        description="With a code the authenticator app shows for the secret of "
        "`POST /api/user/2fa`. Answers ten single-use recovery codes, shown this once: each "
        "stands in for the app's code, at login or to turn the factor off. Every other login "
        "session ends: its JWT is refused from then on and its sockets close (4401); called "
        "with an API key, every session ends. 409 `two_factor_off` when no enrolment was "
        "started, `two_factor_on` when the factor is already on. "
        f"{OTP_RATE_LIMIT_DESCRIPTION}",
        request=(TwoFactorConfirmInput, {"code": "123456"}),
        responses={200: (RecoveryCodesOutput, RECOVERY_CODES_EXAMPLE)},
        errors=[
            ErrorCode.OTP_INVALID,
            ErrorCode.TWO_FACTOR_ON,
            ErrorCode.TWO_FACTOR_OFF,
            ErrorCode.RATE_LIMITED,
        ],
    )
    @action(detail=False, methods=["post"], url_path="2fa/confirm")
    def two_factor_confirm(self, request):
        codes = twofactor.two_factor_confirm(
            user=request.user,
            code=self.validated()["code"],
            keep=request.auth if isinstance(request.auth, LoginSession) else None,
        )
        return self.answer(RecoveryCodesOutput, {"recoveryCodes": codes})

    # --- e-mail verification and change of address (accounts.verification) --------------------
    @operation(
        "user_email_verification_resend",
        summary="Mail the link that confirms your address again",
        description="To the pending address while a change of address waits, else to your "
        "own. Links mailed before stay valid until used or expired. 409 when the address is "
        "verified and no change waits. Rate limited per user "
        "(`RATE_LIMIT_VERIFICATION_MAIL_PER_USER`, shared with changes of address): 429 with "
        "`Retry-After`.",
        responses={204: (None, None)},
        errors=[ErrorCode.EMAIL_ALREADY_VERIFIED, ErrorCode.RATE_LIMITED],
    )
    @action(detail=False, methods=["post"], url_path="verify-email/resend")
    def verify_email_resend(self, request):
        verification.verification_resend(user=request.user, base_url=public_base_url(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @hashes_passwords
    @operation(
        "user_email_change",
        summary="Change your e-mail address",
        description="Needs your current password; every attempt counts toward the login rate "
        "limit (`RATE_LIMIT_AUTH_PER_IP`, `RATE_LIMIT_AUTH_PER_EMAIL`). The new address "
        "gets a link to confirm it, and the current one a notice of the change; the account "
        "keeps its address until the link is followed (`POST /api/auth/verify-email`). A "
        "later change replaces a pending one. Mails are rate limited per user "
        "(`RATE_LIMIT_VERIFICATION_MAIL_PER_USER`). 429 with `Retry-After`.",
        request=(EmailChangeInput, {"email": "new@example.com", "password": "a-long-passphrase"}),
        responses={
            202: (
                EmailChangeOutput,
                {"email": "me@example.com", "pendingEmail": "new@example.com"},
            )
        },
        errors=[
            ErrorCode.PASSWORD_MISMATCH,
            ErrorCode.EMAIL_TAKEN,
            ErrorCode.RATE_LIMITED,
            ErrorCode.SERVICE_UNAVAILABLE,
        ],
    )
    @action(detail=False, methods=["put"])
    def email(self, request):
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=request.user.email)
        values = self.validated()
        user = verification.user_email_change(
            user=request.user,
            email=values["email"],
            password=values["password"],
            base_url=public_base_url(request),
        )
        return self.answer(EmailChangeOutput, user, status=status.HTTP_202_ACCEPTED)


class SessionViewSet(ResourceViewSet):
    # `/api/user/sessions/:id`: end one of the caller's login sessions.

    lookup_url_kwarg = "session_id"

    @success_operation(
        "user_session_end",
        summary="End one of your login sessions",
        description="Its JWT is refused from then on and its open sockets close (4401).",
        errors=[ErrorCode.NOT_FOUND],
    )
    def destroy(self, request, session_id):
        services.session_end_for_user(user=request.user, session_id=session_id)
        return self.succeeded()


class DashboardViewSet(ResourceViewSet):
    # `/api/dashboard`: profile, API key, a ready WebSocket URL and the newest sessions.

    @operation(
        "dashboard",
        summary="Read your dashboard",
        description="Profile, API key, a WebSocket URL carrying a JWT, and the 20 newest "
        "sessions. Called with an API key, it opens a session for the socket's JWT.",
        responses={
            200: (
                DashboardOutput,
                {
                    "email": "me@example.com",
                    "plan": "free",
                    "matrixId": None,
                    "matrixStatus": "none",
                    "apiKey": API_KEY,
                    "emailVerified": True,
                    "wsUrl": f"wss://relay.example.com/ws?token={JWT}",
                    "sessions": [
                        {
                            "id": SESSION_ID,
                            "created_at": 1795320000000,
                            "last_seen": 1795320060000,
                            "active": 1,
                        }
                    ],
                },
            )
        },
    )
    def list(self, request):
        user = request.user
        jwt = getattr(request, "jwt", None)
        if jwt is None:
            # Called with an API key: the socket needs a JWT, so open a session for it.
            jwt = services.session_open(user=user).token
        dashboard = {
            "user": user,
            "ws_url": f"{ws_base_url(request)}/ws?token={jwt}",
            "sessions": selectors.sessions_newest(user=user),
        }
        return self.answer(DashboardOutput, dashboard)
