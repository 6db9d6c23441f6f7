"""Not written yet: issue 31 (a placeholder each, answering 404)."""

from django.http import Http404


def call_list(request, **kwargs):
    raise Http404


def socket_token(request, **kwargs):
    raise Http404


def call_statuses(request, **kwargs):
    raise Http404


def call_cancel(request, **kwargs):
    raise Http404
