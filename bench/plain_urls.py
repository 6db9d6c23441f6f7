"""The URLconf of bench/plain_settings.py: one view that returns a small JSON object."""

from django.http import JsonResponse
from django.urls import path


def plain(request):
    return JsonResponse({"ok": True})


urlpatterns = [path("plain", plain)]
