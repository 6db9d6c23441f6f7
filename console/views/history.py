"""History: the call records of the user's numbers, newest first with the API's filters and
cursor, each voicemail played through the owner's session, marked heard and deleted."""

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.forms import HistoryFilterForm
from console.signin import signed_in
from console.views.common import next_page, refused
from core.errors import ApplicationError, NotFound
from core.fields import validated
from history import selectors, services
from history.responses import recording_download
from history.serializers import HistoryQuery
from virtual_numbers.selectors import numbers_of, shared_numbers_of

# The query string the page reads: the API's filters and cursor (its own page size).
QUERY = ("status", "number_id", "before")


@signed_in
@require_GET
def history_list(request):
    """GET /api/history's query serializer and selector: a bad filter or cursor is the
    form's 400, a number neither the user's nor shared with them the 404 page (NotFound
    passes through). A shared number's calls are shown when it is chosen (issue 57)."""
    query = {name: request.GET[name] for name in QUERY if request.GET.get(name, "") != ""}
    shared = [membership.number for membership in shared_numbers_of(user=request.user)]
    form = HistoryFilterForm(query, numbers=numbers_of(user=request.user), shared=shared)
    form.is_valid()  # its fields take any string: HistoryQuery judges them
    try:
        values = dict(validated(HistoryQuery, query))
        if values["status"] == "all":
            values["status"] = None
        page = selectors.history_page(user=request.user, **values)
    except NotFound:
        raise
    except ApplicationError as error:
        return refused(request, "console/history.html", form, error, page=None)
    older = None
    if page.next_cursor:
        filters = {name: query[name] for name in ("status", "number_id") if name in query}
        older = f"{reverse('console:history')}?{urlencode(filters | {'before': page.next_cursor})}"
    return render(
        request,
        "console/history.html",
        {"form": form, "page": page, "older": older, "here": request.get_full_path()},
    )


@signed_in
@require_GET
def history_record(request, record_id):
    """One record, as the history list shows it: where a voicemail's mail links. Anyone
    else's record, or an unknown id, is the 404 page (call_record_access)."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    return render(
        request,
        "console/history_entry.html",
        {"record": record, "here": request.get_full_path()},
    )


def _voicemail(request, record_id):
    """The user's record with a message; NotFound (the 404 page) for anyone else's, an
    unknown or malformed id, or a record without one."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    if not record.recording:
        raise NotFound()
    return record


def _back(request) -> str:
    """The history page the form came from, else the first."""
    return next_page(request, reverse("console:history"))


@signed_in
@require_GET
def recording(request, record_id):
    """The message as WAV to its owner, through the session: the API's checks
    (call_record_access, no message or file: 404), never cached, never a public URL."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    response = recording_download(request, record)
    response["Cache-Control"] = "private, no-store"
    return response


@signed_in
@require_POST
def recording_heard(request, record_id):
    record = _voicemail(request, record_id)
    services.call_record_mark_heard(record=record)
    messages.success(request, f"The message from {record.caller_num} is marked heard.")
    return redirect(_back(request))


@signed_in
@require_http_methods(["GET", "POST"])
def recording_delete(request, record_id):
    """A confirmation page, then call_record_recording_delete: the record stays."""
    record = _voicemail(request, record_id)
    if request.method == "POST":
        services.call_record_recording_delete(record=record)
        messages.success(request, f"The message from {record.caller_num} is deleted.")
        return redirect(_back(request))
    return render(
        request, "console/history_delete.html", {"record": record, "back": _back(request)}
    )
