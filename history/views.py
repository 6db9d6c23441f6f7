from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

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
        # A plain dict: with a QueryDict DRF would read `?status=` as "not given".
        query = HistoryQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        q = query.validated_data
        page = selectors.history_page(
            user=request.user,
            status=None if q["status"] == "all" else q["status"],
            limit=q["limit"],
            offset=q["offset"],
            number_id=q.get("number_id"),
        )
        return Response(page.body("history", CallRecordOutput))
