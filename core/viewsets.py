"""The base of every resource's ViewSet: one input serializer per action, read in one place."""

from rest_framework import metadata, routers, viewsets


class ResourceMetadata(metadata.SimpleMetadata):
    """OPTIONS names the resource, what it renders and parses; it does not describe the
    input of each action (the OpenAPI schema does), so no serializer is built for it."""

    def determine_actions(self, request, view):
        return {}


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

    def get_serializer_class(self):
        return self.input_serializers.get(self.action)

    def validated(self) -> dict:
        serializer = self.get_serializer(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
