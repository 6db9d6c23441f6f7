from drf_spectacular.utils import extend_schema

from core.schema import errors
from core.viewsets import ResourceViewSet
from history import selectors
from history.serializers import (
    CallRecordOutput,
    HistoryListParameters,
    HistoryOutput,
    HistoryQuery,
)


class HistoryViewSet(ResourceViewSet):
    # `/api/history`: the call history of the caller's numbers, newest first.

    @extend_schema(
        operation_id="history_list",
        parameters=[HistoryListParameters],
        responses={200: HistoryOutput, **errors(400, 401, 404)},
    )
    def list(self, request):
        return self.paged_list(
            query=HistoryQuery, fetch=selectors.history_page, key="history", output=CallRecordOutput
        )
