"""Numbers: the list, taking one through the CAPTCHA, its alias, its PIN and giving it back;
an invitation to share someone's number, accepted."""

import uuid

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from captcha import services as captcha
from captcha.models import CaptchaChallenge
from console import signin
from console.forms import (
    AliasForm,
    InvitationAcceptForm,
    MemberInviteForm,
    NumberCreateForm,
    PinChangeForm,
    SharedNoticesForm,
)
from console.signin import signed_in
from console.views.common import form_page, number_page, posted
from core.clientip import client_ip
from core.errors import ApplicationError, NotFound
from core.fields import validated
from mail.links import public_base_url
from virtual_numbers import selectors as numbers
from virtual_numbers import services as numbers_services
from virtual_numbers.serializers import (
    AliasInput,
    MemberInviteInput,
    MembershipNotificationsInput,
    NumberCreateInput,
    PinChangeInput,
)
from webhooks.selectors import webhook_of


@signed_in
def number_list(request):
    shared = numbers.shared_numbers_of(user=request.user)
    for membership in shared:
        membership.notices = _notices(membership)
    return render(
        request,
        "console/numbers.html",
        {"numbers": numbers.numbers_of(user=request.user), "shared": shared},
    )


def _notices(membership) -> list[str]:
    """The member's switches for a shared number that are on, in words."""
    switches = (
        (membership.notify_webhook, "webhook"),
        (membership.notify_matrix, "Matrix"),
        (membership.missed_call_email, "missed-call mail"),
        (membership.voicemail_email, "voicemail mail"),
    )
    return [words for on, words in switches if on]


@signed_in
@require_http_methods(["GET", "POST"])
def members(request, number_id):
    """Whom a number is shared with, and a form to invite one more: for its owner and its
    managers (anyone else: the 404 page), through GET /api/numbers/:id/members' selector and
    POST's serializer and service (the rate limit, the 20, the codes on the form)."""
    access = numbers.number_shared_access(user=request.user, number_id=number_id)
    if not access.manages:
        raise NotFound()
    form = MemberInviteForm(posted(request))

    def invite():
        values = validated(MemberInviteInput, form.values("email", "role"))
        member = numbers_services.member_invite(
            access=access, **values, base_url=public_base_url(request)
        )
        messages.success(request, f"An invitation is mailed to {member.email}.")
        return redirect("console:members", access.number.pk)

    listed = numbers.members_of(number=access.number)
    return form_page(
        request, "console/members.html", form, invite, number=access.number, members=listed
    )


@signed_in
@require_http_methods(["POST"])
def member_remove(request, number_id, member_id):
    """A row's Remove (or Withdraw) button on the members page, or a member's Leave button on
    the numbers page: DELETE /api/numbers/:id/members/:memberId's service and its rules."""
    access = numbers.number_shared_access(user=request.user, number_id=number_id)
    member = numbers.member_access(access=access, member_id=member_id)
    numbers_services.member_remove(access=access, member=member)
    if member.user_id == request.user.pk:
        messages.success(request, f"You left {access.number.number}.")
        return redirect("console:numbers")
    messages.success(request, f"{member.email} is removed from {access.number.number}.")
    return redirect("console:members", access.number.pk)


@signed_in
@require_http_methods(["GET", "POST"])
def shared_notices(request, number_id):
    """What the signed-in member hears of a number shared with them besides their sockets:
    PUT /api/numbers/shared/:id's serializer and service, on their own membership only
    (a number of their own, or not shared with them: the 404 page)."""
    membership = numbers.shared_number_of(user=request.user, number_id=number_id)
    initial = {
        "webhook": membership.notify_webhook,
        "matrix": membership.notify_matrix,
        "missedCallEmail": membership.missed_call_email,
        "voicemailEmail": membership.voicemail_email,
    }
    form = SharedNoticesForm(posted(request), initial=initial)

    def save():
        values = validated(MembershipNotificationsInput, form.values())
        numbers_services.membership_notifications_set(
            user=request.user,
            number_id=membership.number_id,
            webhook=values["webhook"],
            matrix=values["matrix"],
            missed_call_email=values["missedCallEmail"],
            voicemail_email=values["voicemailEmail"],
        )
        messages.success(request, f"Your notices of {membership.number.number} are saved.")
        return redirect("console:shared_notices", membership.number_id)

    return form_page(
        request,
        "console/shared_notices.html",
        form,
        save,
        membership=membership,
        webhook=webhook_of(user=request.user),
    )


@require_http_methods(["GET", "POST"])
def invitation(request, token: str):
    """A mailed invitation to share a number (issue 57): who invites, to which number, and a
    button that accepts it (virtual_numbers.services.invitation_accept, as POST
    /api/invitations/<token>/accept) for a signed-in person; links to log in or sign up that
    come back here for anyone else. A link used, expired or withdrawn: a page that says so
    (400). The token is the path's `token`, which the access log writes as [token]; the page
    is never cached and sends no Referer elsewhere."""
    pending = numbers_services.invitation_pending(token=token)
    if pending is None:
        response = render(request, "console/invitation_invalid.html", status=400)
    else:
        session = signin.current_session(request)
        form = InvitationAcceptForm(posted(request) if session is not None else None)

        def accept():
            joined = numbers_services.invitation_accept(user=session.user, token=token)
            messages.success(
                request,
                f"You are now a {joined.role} of {joined.number.number} ({joined.number.alias}).",
            )
            return redirect("console:numbers")

        response = form_page(
            request,
            "console/invitation.html",
            form,
            accept,
            invitation=pending,
            signed_in_as=session.user.email if session is not None else None,
            here=request.path,
        )
    response["Referrer-Policy"] = "same-origin"  # as the verification link's page, and why
    return response


def _challenge(request) -> tuple[CaptchaChallenge | None, ApplicationError | None]:
    """A new CAPTCHA challenge for the create form, counted like GET /api/captcha."""
    try:
        captcha.captcha_issue_rate_limit(ip=client_ip(request))
    except ApplicationError as error:
        return None, error
    return captcha.captcha_challenge_issue(), None


def _answered_token(request, answer: int) -> str:
    """Check the answer to the challenge the form carried (POST /api/captcha/verify's
    service and rate limit): the token number_create spends."""
    captcha.captcha_verify_rate_limit(ip=client_ip(request))
    try:
        a, b = int(request.POST.get("a", "")), int(request.POST.get("b", ""))
        challenge_id = uuid.UUID(request.POST.get("challengeId", ""))
        token = captcha.captcha_verify(a=a, b=b, answer=answer, challenge_id=challenge_id)
    except (ValueError, TypeError) as exc:  # the hidden fields were not the ones we sent
        raise captcha.CaptchaInvalid() from exc
    return str(token.pk)


@signed_in
@require_http_methods(["GET", "POST"])
def number_create(request):
    """Take a number: the CAPTCHA's question in the form, its answer checked by
    captcha.services, the token it gives spent by virtual_numbers' number_create."""
    form = NumberCreateForm(posted(request))
    error = None
    if form.is_bound:
        if form.is_valid():
            try:
                token = _answered_token(request, form.cleaned_data["answer"])
                values = form.values("alias", "pin") | {"captchaToken": token}
                values = validated(NumberCreateInput, values)
                number = numbers_services.number_create(
                    user=request.user,
                    alias=values["alias"],
                    pin=values["pin"],
                    captcha_token=values["captchaToken"],
                )
            except ApplicationError as refusal:
                error = refusal
            else:
                messages.success(request, f"{number.number} is yours.")
                return redirect("console:numbers")
        form.data = form.data.copy()
        form.data.pop("answer", None)  # a new question follows: the old answer goes
    challenge, issue_error = _challenge(request)  # a question for the page, every time
    refusals = [refusal for refusal in (error, issue_error) if refusal is not None]
    context = {"form": form, "challenge": challenge, "refusal": None}
    for refusal in refusals:
        if form.is_bound:
            form.place(refusal)
        else:
            context["refusal"] = refusal.message
    status = refusals[0].status if refusals else 400 if form.is_bound else 200
    response = render(request, "console/number_create.html", context, status=status)
    for name, value in (refusals[0].headers if refusals else {}).items():
        response[name] = value
    return response


@number_page(["GET", "POST"])
def number_alias(request, number):
    form = AliasForm(posted(request), initial={"alias": number.alias})

    def save():
        alias = validated(AliasInput, form.values("alias"))["alias"]
        numbers_services.number_alias_set(number=number, alias=alias)
        messages.success(request, f"{number.number} is now called {alias}.")
        return redirect("console:numbers")

    return form_page(request, "console/number_alias.html", form, save, number=number)


@number_page(["GET", "POST"])
def number_pin(request, number):
    form = PinChangeForm(posted(request))

    def change():
        values = validated(PinChangeInput, form.values("currentPin", "newPin"))
        numbers_services.number_pin_change(
            number=number, current_pin=values["currentPin"], new_pin=values["newPin"]
        )
        messages.success(request, f"The PIN of {number.number} is changed.")
        return redirect("console:numbers")

    return form_page(request, "console/number_pin.html", form, change, number=number)


@number_page(["GET", "POST"])
def number_delete(request, number):
    if request.method == "POST":
        numbers_services.number_delete(number=number)
        messages.success(request, f"{number.number} is given back, with its history.")
        return redirect("console:numbers")
    return render(request, "console/number_delete.html", {"number": number})
