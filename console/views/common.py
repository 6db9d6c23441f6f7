"""The shapes every console page shares: a form page, and a refusal shown on its form."""

import functools
from collections.abc import Callable

from django.http import HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from console.forms import ConsoleForm
from console.signin import signed_in
from core.errors import ApplicationError
from virtual_numbers import selectors as numbers


def refused(request, template: str, form: ConsoleForm, error: ApplicationError, **context):
    """The page again, `error` placed on its form, answered with the API's status."""
    form.place(error)
    response = render(request, template, {"form": form, **context}, status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def posted(request):
    """The submitted form data, or None for a page asked for with GET (an unbound form)."""
    return request.POST if request.method == "POST" else None


def form_page(
    request,
    template: str,
    form: ConsoleForm,
    act: Callable[[], HttpResponse],
    **context,
) -> HttpResponse:
    """A page with one form: shown on GET; on a POST whose form is valid, `act()` checks the
    values with the API's input serializer, writes through the service and answers where to go
    next. An ApplicationError it raises puts the page back with the error on its form."""
    if request.method == "POST" and form.is_valid():
        try:
            return act()
        except ApplicationError as error:
            return refused(request, template, form, error, **context)
    # A form the browser sent that is not even well formed (say, NUL in a field) is as bad a
    # request as one the serializer refuses.
    status = 400 if form.is_bound else 200
    return render(request, template, {"form": form, **context}, status=status)


def next_page(request, default: str) -> str:
    """Where a form goes back to: its `next` (posted, or in the query) when that is a page of
    this site, else `default`. Never another site: no open redirect."""
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return default


def number_page(methods: list[str], access=numbers.number_access):
    """A page of one of the signed-in user's numbers: the view is called with the number
    (`access`, numbers.number_access unless the page says otherwise: another user's, or none,
    is a 404) instead of its id, for the HTTP `methods` only."""

    def decorate(view):
        @signed_in
        @require_http_methods(methods)
        @functools.wraps(view)
        def page(request, number_id):
            return view(request, access(user=request.user, number_id=number_id))

        return page

    return decorate
