"""Links between admin pages, so staff can follow a row to its relatives both ways."""

from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode


def change_link(obj, label=None) -> str:
    if obj is None:
        return "-"
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


def changelist_link(model, label: str, **filters) -> str:
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), label)
