"""Not written yet: issue 31 (a placeholder each, answering 404)."""

from django.http import Http404


def account(request, **kwargs):
    raise Http404


def api_key_regenerate(request, **kwargs):
    raise Http404


def matrix_id(request, **kwargs):
    raise Http404


def webhook(request, **kwargs):
    raise Http404


def webhook_rotate(request, **kwargs):
    raise Http404


def webhook_delete(request, **kwargs):
    raise Http404


def session_end(request, **kwargs):
    raise Http404
