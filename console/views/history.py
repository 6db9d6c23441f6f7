"""Not written yet: issue 31 (a placeholder each, answering 404)."""

from django.http import Http404


def history_list(request, **kwargs):
    raise Http404


def recording(request, **kwargs):
    raise Http404


def recording_heard(request, **kwargs):
    raise Http404


def recording_delete(request, **kwargs):
    raise Http404
