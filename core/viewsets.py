"""The base of every resource's ViewSet: one input serializer per action, read in one place."""

from rest_framework import metadata, routers, viewsets
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from core import fields
from core.schema import UUID_PATH_SCHEMA, SuccessOutput


class ResourceMetadata(metadata.SimpleMetadata):
    """OPTIONS names the resource, what it renders and parses; it does not describe the
    input of each action (the OpenAPI schema does), so no serializer is built for it."""

    def determine_actions(self, request, view):
        return {}


class JsonErrorsOnly(BaseContentNegotiation):
    """For an action that answers a file (a file response, past the renderers) and its errors
    in JSON, whatever the client's Accept header asks for (a player sends audio/*, a
    download application/zip)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return parsers[0]


class Router(routers.SimpleRouter):
    """The API's router: paths without a trailing slash, ids matched by Django's converters
    (`<str:number_id>`), as the interface document writes them."""

    def __init__(self):
        super().__init__(trailing_slash=False, use_regex_path=False)


class ResourceViewSet(viewsets.GenericViewSet):
    # A ViewSet whose actions name their input serializer in `input_serializers`. Output
    # serializers are named where each action builds its response; input is validated only
    # through `validated()`, so an action never reads `request.data` unchecked. (Comments, not
    # a docstring: drf-spectacular would publish a docstring as every operation's description.)

    input_serializers: dict = {}
    metadata_class = ResourceMetadata
    # Path ids are the resource's public ids: anything but a slash, checked by the action,
    # which answers 404 for an id that is malformed, unknown or another user's.
    lookup_value_converter = "str"
    # The path id as the schema documents it (core.platform.schema.RelayAutoSchema): public ids are
    # UUIDs; a ViewSet whose ids are something else says so.
    lookup_schema = UUID_PATH_SCHEMA

    def get_serializer_class(self):
        return self.input_serializers.get(self.action)

    def paged_list(self, *, query, fetch, output) -> Response:
        """A paged list: read the query string with `query` (a PageQuery), hand its values
        to `fetch` (a selector returning a Page; status "all" is passed as None) and answer
        the Page through `output` (a PageOutput)."""
        # A plain dict: with a QueryDict DRF would read `?status=` as "not given".
        params = query(data=self.request.query_params.dict())
        params.is_valid(raise_exception=True)
        values = dict(params.validated_data)
        if values.get("status") == "all":
            values["status"] = None
        return self.answer(output, fetch(user=self.request.user, **values))

    def answer(self, output, instance, *, status: int = 200) -> Response:
        """`instance` rendered by the output serializer `output` (one that reads nothing but
        its instance), with `status`."""
        return Response(fields.represent(output, instance), status=status)

    def succeeded(self) -> Response:
        """`{"success": true}` (SuccessOutput), for an action with nothing else to return."""
        return self.answer(SuccessOutput, None)

    def validated(self) -> dict:
        return fields.validated(self.get_serializer_class(), self.request.data)
