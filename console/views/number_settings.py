"""Not written yet: issue 31 (a placeholder each, answering 404)."""

from django.http import Http404


def blocklist(request, **kwargs):
    raise Http404


def blocked_remove(request, **kwargs):
    raise Http404


def forwarding(request, **kwargs):
    raise Http404


def forwarding_clear(request, **kwargs):
    raise Http404


def greeting(request, **kwargs):
    raise Http404
