"""drf-spectacular's AutoSchema, two of its private methods overridden (settings:
DEFAULT_SCHEMA_CLASS): a DELETE that reads a body documents it, and a path id takes the
schema its ViewSet declares."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import is_list_serializer

from core.schema import UUID_PATH_SCHEMA


class RelayAutoSchema(AutoSchema):
    """Every Relay response is a JSON object (lists come wrapped: `{"numbers": [...]}`), so
    a ViewSet's `list` action is not documented as a bare array, as drf-spectacular would
    guess from the action's name. A DELETE documents the body it reads, when it declares
    one (`DELETE /api/numbers/{number_id}/blocked`), and the path id takes the schema the
    ViewSet declares in `lookup_schema` (a uuid unless said otherwise)."""

    def _is_list_view(self, serializer=None) -> bool:
        if serializer is None:
            serializer = self.get_response_serializers()
        if isinstance(serializer, dict) and serializer:
            serializer = serializer[min(serializer, key=str)]
        return is_list_serializer(serializer)

    def _get_request_body(self, direction="request"):
        if self.method != "DELETE" or self.get_request_serializer() is None:
            return super()._get_request_body(direction)
        # drf-spectacular documents bodies only for PUT, PATCH and POST; this DELETE reads one.
        self.method = "POST"
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"

    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        lookup = getattr(self.view, "lookup_url_kwarg", None)
        for parameter in parameters:
            if parameter["name"] == lookup:
                parameter["schema"] = dict(getattr(self.view, "lookup_schema", UUID_PATH_SCHEMA))
        return parameters
