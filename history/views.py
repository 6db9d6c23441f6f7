from rest_framework.decorators import action

from core.errors import ErrorCode
from core.schema import operation, success_operation, wav_download_operation
from core.viewsets import JsonErrorsOnly, ResourceViewSet
from history import recordings, selectors, services
from history.responses import call_recording_download, recording_download
from history.serializers import (
    HistoryListParameters,
    HistoryOutput,
    HistoryQuery,
)

HISTORY_EXAMPLE = {
    "history": [
        {
            "id": "2e4f6a8c-0b1d-4e3f-a5b7-c9d1e3f5a7b9",
            "number_id": "7c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f",
            "caller_num": "+447700900123",
            "status": "answered",
            "duration": 45,
            "created_at": 1795320000000,
            "number": "+442079460042",
            "alias": "Office",
            "recording_url": "/api/history/2e4f6a8c-0b1d-4e3f-a5b7-c9d1e3f5a7b9/recording",
            "recording_seconds": 8.52,
            "heard": False,
            "answered_by": "voicemail",
            "forwarded_to": None,
            "ring_entry": None,
            "transferred_to": None,
            "answered_member_id": None,
            "answered_member_email": None,
            "transcript": "hi it's sam please call me back about the delivery",
            "transcript_confidence": 0.58,
            "transcript_status": "done",
        }
    ],
    "total": 1,
    "limit": 50,
    "offset": 0,
    "nextCursor": None,
}


class HistoryViewSet(ResourceViewSet):
    # `/api/history`: the call history of the caller's numbers, newest first.

    lookup_url_kwarg = "record_id"

    @operation(
        "history_list",
        summary="List the call history of your numbers",
        description="Newest first. Without `number_id`, your own numbers' calls; with it, "
        "that number's, yours or one shared with you (`GET /api/numbers/shared`). 400 for a "
        "bad filter, `limit`, `offset` or `before`; 404 when `number_id` is neither.",
        parameters=[HistoryListParameters],
        responses={200: (HistoryOutput, HISTORY_EXAMPLE)},
        errors=[ErrorCode.INVALID_REQUEST, ErrorCode.NOT_FOUND],
    )
    def list(self, request):
        return self.paged_list(
            query=HistoryQuery, fetch=selectors.history_page, output=HistoryOutput
        )

    def record(self):
        """The caller's record named in the path; 404 for anyone else's."""
        return selectors.call_record_access(
            user=self.request.user, record_id=self.kwargs["record_id"]
        )

    @wav_download_operation(
        "history_recording_get",
        summary="Download a call's voicemail message",
        description="The message as WAV (16-bit PCM, 8 kHz, mono), to the number's owner and "
        "members; 404 for anyone else's record and for a record without a message.",
    )
    @action(detail=True, methods=["get"], content_negotiation_class=JsonErrorsOnly)
    def recording(self, request, record_id):
        return recording_download(request, self.record())

    @success_operation(
        "history_recording_delete",
        summary="Delete a call's voicemail message",
        description="The record stays, with `recording_url` null; 404 when it has no message.",
        errors=[ErrorCode.NOT_FOUND],
    )
    @recording.mapping.delete
    def recording_delete(self, request, record_id):
        services.call_record_recording_delete(record=self.record())
        return self.succeeded()


class CallRecordingViewSet(ResourceViewSet):
    # `/api/recordings/:id`: a bridged call's recording (issue 58), both parties in stereo.

    lookup_url_kwarg = "recording_id"
    content_negotiation_class = JsonErrorsOnly

    def recording(self, *, owner: bool = False):
        """The recording named in the path, of the caller's call or (unless `owner`) of a
        call to a number shared with them; 404 for anyone else's."""
        return recordings.call_recording_access(
            user=self.request.user, recording_id=self.kwargs["recording_id"], owner=owner
        )

    @wav_download_operation(
        "recordings_get",
        summary="Download a bridged call's recording",
        description="The recording as WAV (16-bit PCM, 8 kHz, stereo: the caller on the left "
        "channel, the other party on the right), to the call's owner and the number's "
        "members; 404 for anyone else's and for an id that is no bridged call's recording.",
    )
    def retrieve(self, request, recording_id):
        return call_recording_download(request, self.recording())

    @success_operation(
        "recordings_delete",
        summary="Delete a bridged call's recording",
        description="Its file and its row (the call's record stays), by the call's owner; "
        "404 for anyone else, a member of the number included.",
        errors=[ErrorCode.NOT_FOUND],
    )
    def destroy(self, request, recording_id):
        recordings.call_recording_delete(recording=self.recording(owner=True))
        return self.succeeded()
