from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core.schema import errors
from core.viewsets import ResourceViewSet
from realtime import calls, pipeline, selectors
from realtime.serializers import (
    CallAckOutput,
    CallDetailOutput,
    CallListOutput,
    CallListParameters,
    CallOutput,
    CallsQuery,
    CallSubmitInput,
)


class CallViewSet(ResourceViewSet):
    # `/api/calls`: the caller's outbound calls; submit, read and cancel them.

    lookup_url_kwarg = "call_id"
    # callId is the client's string: anything but control characters, slashes included.
    lookup_value_converter = "path"

    @extend_schema(
        operation_id="calls_list",
        parameters=[CallListParameters],
        responses={200: CallListOutput, **errors(400, 401)},
    )
    def list(self, request):
        return self.paged_list(
            query=CallsQuery, fetch=selectors.calls_page, key="calls", output=CallOutput
        )

    @extend_schema(
        operation_id="calls_submit",
        request=CallSubmitInput,
        responses={202: CallAckOutput, **errors(400, 401, 415, 429)},
    )
    def create(self, request):
        # Checked by CallSubmitInput inside the service: a repeated callId is acked whatever
        # the rest of the body, so the lookup comes before the shape check.
        call, _created = calls.call_request_submit(user=request.user, data=request.data)
        return Response(pipeline.call_ack_event(call), status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="calls_get",
        responses={200: CallDetailOutput, **errors(401, 404)},
    )
    def retrieve(self, request, call_id):
        call = selectors.call_access(user=request.user, call_id=call_id)
        return Response(CallDetailOutput(call).data)

    @extend_schema(
        operation_id="calls_cancel",
        request=None,
        responses={200: CallOutput, **errors(401, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, call_id):
        call = calls.call_request_cancel(
            call=selectors.call_access(user=request.user, call_id=call_id)
        )
        return Response(CallOutput(call).data)
