"""Calls: place one (POST /api/calls's service), watch its progress live over the socket,
cancel it while it runs. The page works without JavaScript but for the live status."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import services as accounts_services
from accounts.wsurl import ws_base_url
from calls.states import TERMINAL_STATES, CallState
from console.forms import CallForm
from console.signin import signed_in, signed_in_json
from console.views.common import posted
from core.errors import ApplicationError, NotFound
from core.fields import validated
from realtime import selectors, services
from realtime.serializers import CallsQuery
from virtual_numbers.selectors import numbers_of

PAGE_SIZE = 20
# The socket checks its token only when it connects: a minute is enough to connect, and a
# token copied out of the page is worthless soon after.
SOCKET_TOKEN_LIFETIME = timedelta(seconds=60)


def _page_of_calls(request):
    """The page of calls the query string asks for (`before`: the API's nextCursor); an
    older page that cannot be (a malformed cursor) is the 404 page."""
    query = {"limit": str(PAGE_SIZE)}
    if "before" in request.GET:
        query["before"] = request.GET["before"]
    try:
        values = validated(CallsQuery, query)
    except ApplicationError as error:
        raise NotFound() from error
    return selectors.calls_page(
        user=request.user,
        status=None,
        limit=values["limit"],
        offset=0,
        before=values.get("before"),
    )


def _calls_page(request, form: CallForm, *, status: int = 200, error=None, cancel_error=None):
    """The calls page: the form (with `error` placed on it) and a page of calls (with
    `cancel_error` above them), answered with the status of the error shown."""
    if error is not None:
        form.place(error)
    page = _page_of_calls(request)
    context = {
        "form": form,
        "calls": page.records,
        "next_cursor": page.next_cursor,
        "older": "before" in request.GET,
        "terminal": TERMINAL_STATES,
        # For the script: each status's words, and which ones end a call (no Cancel then).
        "labels": {"names": dict(CallState.choices), "terminal": sorted(TERMINAL_STATES)},
        "cancel_error": cancel_error.message if cancel_error else None,
        # Calls from the browser need the SIP agent (issue 43): the form shows only then.
        "browser_calls": settings.TELEPHONY_PROVIDER == "sip",
    }
    response = render(request, "console/calls.html", context, status=status)
    shown = error or cancel_error
    for name, value in (shown.headers if shown else {}).items():
        response[name] = value  # Retry-After
    return response


@signed_in
@require_http_methods(["GET", "POST"])
def call_list(request):
    """GET: the form and the calls. POST: place a call, as POST /api/calls does (the same
    service, which checks the values with CallSubmitInput); the same callId again creates
    nothing, so a form posted twice places one call."""
    form = CallForm(posted(request), numbers=numbers_of(user=request.user))
    if request.method == "GET":
        return _calls_page(request, form)
    if not form.is_valid():  # a CharField-only form is always valid; kept for the shape
        return _calls_page(request, form, status=400)
    try:
        call, created = services.call_submit(user=request.user, data=form.submitted())
    except ApplicationError as error:
        return _calls_page(request, form, status=error.status, error=error)
    if created:
        messages.success(request, f"Calling {call.to}.")
    else:
        messages.info(request, f"That call to {call.to} was already placed; it is {call.status}.")
    return redirect("console:calls")


@signed_in
@require_POST
def call_cancel(request, call_id):
    """Cancel a call of the user's (call_access: the 404 page for anyone else's or an unknown
    id); one that has ended already is a sentence on the calls page (409)."""
    call = selectors.call_access(user=request.user, call_id=call_id)
    try:
        services.call_cancel(call=call)
    except ApplicationError as error:
        form = CallForm(numbers=numbers_of(user=request.user))
        return _calls_page(request, form, status=error.status, cancel_error=error)
    messages.success(request, f"The call to {call.to} is canceled.")
    return redirect("console:calls")


@never_cache
@require_POST
@signed_in_json
def socket_token(request):
    """The socket's URL with a JWT of this browser's own LoginSession, valid for a minute:
    ending the session (Log out, the dashboard) closes the socket with 4401. A POST, CSRF
    checked, so no other site can read one; never cached."""
    token = accounts_services.session_token_issue(
        session=request.login_session, lifetime=SOCKET_TOKEN_LIFETIME
    )
    return JsonResponse({"wsUrl": f"{ws_base_url(request)}/ws?token={token}"})


@never_cache
@require_GET
@signed_in_json
def call_statuses(request):
    """`{callId: status}` of the newest calls, for the script to catch up on the frames sent
    before its socket opened."""
    page = selectors.calls_page(user=request.user, status=None, limit=PAGE_SIZE * 2, offset=0)
    return JsonResponse({call.call_id: call.status for call in page.records})
