"""Every API resource is a ViewSet on a router, and every route answers OPTIONS cleanly."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from core.viewsets import ResourceViewSet

DOCUMENTATION = {"api/schema", "api/docs"}


def api_routes() -> list[tuple[str, URLPattern]]:
    """(path, pattern) of every route under api/."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            else:
                found.append((prefix + str(entry.pattern), entry))

    walk(get_resolver().url_patterns, "")
    return [(path, p) for path, p in found if path.startswith("api/")]


def test_every_api_resource_is_a_viewset_on_a_router():
    routes = [(path, p) for path, p in api_routes() if path not in DOCUMENTATION]
    assert len(routes) >= 18
    for path, pattern in routes:
        view_class = getattr(pattern.callback, "cls", None)
        assert view_class is not None and issubclass(view_class, ResourceViewSet), path
        assert getattr(pattern.callback, "actions", None), f"{path} is not a router route"
        assert not path.endswith("/"), path


@pytest.mark.django_db
def test_options_on_every_route_answers_json_without_an_error(api_client, client_jwt):
    for path, _pattern in api_routes():
        if path in DOCUMENTATION:
            continue
        concrete = re.sub(r"<\w+:\w+>", "0", path)
        for client in (api_client, client_jwt):
            response = client.options(f"/{concrete}")
            assert response.status_code in (200, 401), (path, response.status_code)
            assert response["Content-Type"].startswith("application/json"), path
