from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core import metrics
from core.downloads import file_download
from core.errors import ErrorCode
from core.schema import operation, uuid_path_parameter, wav_download_operation
from core.viewsets import JsonErrorsOnly, ResourceViewSet
from realtime import pipeline, selectors, services
from realtime.serializers import (
    CallAckOutput,
    CallDetailOutput,
    CallListOutput,
    CallListParameters,
    CallOutput,
    CallsQuery,
    CallSubmitInput,
    CallTransferInput,
    CallTransferOutput,
)

CALL_ID = "order-1234"
CALL = "6f1c2a4e-8d2b-4f4e-9a51-3c7e0b9d1a22"  # Relay's own id of the example call
CALL_EXAMPLE = {
    "callId": CALL_ID,
    "call": CALL,
    "to": "+442079460123",
    "message": "Your table is ready",
    "status": "canceled",
    "duration": None,
    "reason": "canceled by the user",
    "createdAt": 1795320000000,
    "updatedAt": 1795320001500,
    "endedAt": 1795320001500,
    "from": "+442079460042",
    "machineDetection": None,
    "answeredBy": None,
}


RECORDING_ID_PARAMETER = uuid_path_parameter(
    "recording_id", description="the `recordingId` of the call's `recorded` event"
)


class CallViewSet(ResourceViewSet):
    # `/api/calls`: the caller's outbound calls; submit, read and cancel them.

    lookup_url_kwarg = "call_id"
    # callId is the client's string: anything but control characters, slashes included.
    lookup_value_converter = "path"
    lookup_schema = {"type": "string", "minLength": 1, "maxLength": 64}

    @operation(
        "calls_list",
        summary="List your outbound calls",
        description="Newest first, paged like the history; a client that reconnects its "
        "socket reads this to catch up. 400 for a bad filter, `limit`, `offset` or `before`.",
        parameters=[CallListParameters],
        responses={
            200: (
                CallListOutput,
                {"calls": [CALL_EXAMPLE], "total": 1, "limit": 50, "offset": 0, "nextCursor": None},
            )
        },
        errors=[ErrorCode.INVALID_REQUEST],
    )
    def list(self, request):
        return self.paged_list(query=CallsQuery, fetch=selectors.calls_page, output=CallListOutput)

    @operation(
        "calls_submit",
        summary="Place a call",
        description="The REST twin of the socket's `call` frame: the call is committed "
        "before the answer, and the same `callId` again creates nothing (it answers the "
        "call's current status). Its progress arrives as `call_status` frames on the socket. "
        "Rate limited per user (`RATE_LIMIT_CALLS_PER_USER`). The dialing policy refuses "
        "numbers outside `DIAL_ALLOWED_COUNTRIES` and premium-rate and similar numbers "
        "(`destination_not_allowed`), and the plan's quotas (calls and answered seconds per "
        "rolling day, calls at once; see `quotas` of `GET /api/user/me`) answer "
        "`quota_exceeded` with `Retry-After`. A refused call is not stored.",
        request=(
            CallSubmitInput,
            {
                "callId": CALL_ID,
                "to": "+442079460123",
                "message": "Your table is ready",
                "from": "+442079460042",
                "language": "en",
            },
        ),
        responses={
            202: (
                CallAckOutput,
                {"type": "call_ack", "callId": CALL_ID, "call": CALL, "status": "queued"},
            )
        },
        errors=[
            ErrorCode.DESTINATION_NOT_ALLOWED,
            ErrorCode.EMAIL_UNVERIFIED,
            ErrorCode.RATE_LIMITED,
            ErrorCode.QUOTA_EXCEEDED,
        ],
    )
    def create(self, request):
        # Checked by CallSubmitInput inside the service: a repeated callId is acked whatever
        # the rest of the body, so the lookup comes before the shape check.
        call, _created = services.call_submit(user=request.user, data=request.data)
        metrics.call_acks.labels("http").inc()
        return Response(pipeline.call_ack_event(call), status=status.HTTP_202_ACCEPTED)

    @operation(
        "calls_get",
        summary="Read one call and its timeline",
        responses={
            200: (
                CallDetailOutput,
                {
                    **CALL_EXAMPLE,
                    "recordings": [],
                    "script": None,
                    "timeline": [
                        {"seq": 1, "status": "queued", "at": 1795320000000, "detail": ""},
                        {"seq": 2, "status": "dialing", "at": 1795320000500, "detail": ""},
                        {
                            "seq": 3,
                            "status": "canceled",
                            "at": 1795320001500,
                            "detail": "canceled by the user",
                        },
                    ],
                },
            )
        },
        errors=[ErrorCode.NOT_FOUND],
    )
    def retrieve(self, request, call_id):
        call = selectors.call_access(user=request.user, call_id=call_id)
        return self.answer(CallDetailOutput, call)

    @operation(
        "calls_cancel",
        summary="Cancel a call",
        description="Any state before the end moves to `canceled` (a ringing SIP call gets "
        "CANCEL, an answered one BYE); 409 `call_not_cancelable` once the call has ended.",
        responses={200: (CallOutput, CALL_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND, ErrorCode.CALL_NOT_CANCELABLE],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, call_id):
        call = services.call_cancel(call=selectors.call_access(user=request.user, call_id=call_id))
        return self.answer(CallOutput, call)

    @operation(
        "calls_transfer",
        summary="Hand a bridged call on to someone else (blind transfer)",
        description="For an inbound call of a number you own or are a member of, in progress "
        "and bridged now to one of the number's phones or a console tab (by its ring list), or "
        "to whoever it was handed on to last: the agent holding the call dials `to` (a phone "
        "number, E.164, or a SIP URI) as the number's owner and bridges the caller to it, "
        "ending the phone's or tab's side; a target that does not answer sends the caller to "
        "voicemail. `:call` is the call's id (a `call_record`'s `id`, an `incoming_call`'s "
        "`call`). For a call you placed from the browser (`:call` its `callId` or id), the "
        "callee is handed on the same way and the tab's side ends; a target that does not "
        "answer gives the callee back to the tab. 202: the agent was told. 404 for another "
        "user's call or an unknown id; 400 for a bad `to` (naming it) or one the dialing "
        "policy refuses (`destination_not_allowed`); 409 `call_not_transferable` for a call "
        "that is not so bridged now (ringing, ended, voicemail, a transfer's target ringing, "
        "an outbound call that plays a message or runs a script); 429 past "
        "`RATE_LIMIT_CALLS_PER_USER`, counted with the calls you place.",
        request=(CallTransferInput, {"to": "+441134960456"}),
        responses={
            202: (
                CallTransferOutput,
                {
                    "call": "2e4f6a8c-0b1d-4e3f-a5b7-c9d1e3f5a7b9",
                    "to": "+441134960456",
                    "status": "transferring",
                },
            )
        },
        errors=[
            ErrorCode.NOT_FOUND,
            ErrorCode.DESTINATION_NOT_ALLOWED,
            ErrorCode.CALL_NOT_TRANSFERABLE,
            ErrorCode.RATE_LIMITED,
        ],
    )
    @action(detail=True, methods=["post"])
    def transfer(self, request, call_id):
        call, to = services.call_transfer(user=request.user, call_ref=call_id, data=request.data)
        return Response(
            {"call": str(call.pk), "to": to, "status": "transferring"},
            status=status.HTTP_202_ACCEPTED,
        )

    @wav_download_operation(
        "calls_recording_get",
        summary="Download what a call's `record` verb recorded",
        description="The recording as WAV (16-bit PCM, 8 kHz, mono), to the call's owner; 404 "
        "for anyone else's call and for an id that is not one of this call's recordings (the "
        "`recordingId` of its `recorded` event).",
        parameters=[RECORDING_ID_PARAMETER],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="recordings/<str:recording_id>",
        content_negotiation_class=JsonErrorsOnly,
    )
    def recording(self, request, call_id, recording_id):
        call = selectors.call_access(user=request.user, call_id=call_id)
        audio = selectors.call_recording_open(call=call, recording_id=recording_id)
        return file_download(
            request, audio, content_type="audio/wav", filename=f"recording-{recording_id}.wav"
        )
