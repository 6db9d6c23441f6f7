from drf_spectacular.utils import extend_schema
from rest_framework import status as http
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.serializers import SuccessOutput
from history import selectors, services
from history.serializers import (
    BlockedCallerInput,
    BlockedCallerOutput,
    BlocklistOutput,
    CallRecordOutput,
    HistoryListParameters,
    HistoryOutput,
    HistoryQuery,
)
from relay.schema import errors
from relay.viewsets import ResourceViewSet
from virtual_numbers.services import number_get_owned


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


class BlocklistViewSet(ResourceViewSet):
    # `/api/numbers/:id/blocked`: the callers blocked on one of the caller's numbers.

    lookup_url_kwarg = "number_id"
    input_serializers = {"blocked_add": BlockedCallerInput, "blocked_remove": BlockedCallerInput}

    @extend_schema(
        operation_id="numbers_blocked_list", responses={200: BlocklistOutput, **errors(401, 404)}
    )
    @action(detail=True, methods=["get"])
    def blocked(self, request, number_id):
        entries = services.blocklist_of(user=request.user, number_id=number_id)
        return Response({"blocked": BlockedCallerOutput(entries, many=True).data})

    @extend_schema(
        operation_id="numbers_blocked_add",
        request=BlockedCallerInput,
        responses={
            200: BlockedCallerOutput,
            201: BlockedCallerOutput,
            **errors(400, 401, 404, 415),
        },
    )
    @blocked.mapping.post
    def blocked_add(self, request, number_id):
        number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        entry, created = services.blocked_caller_add(
            user=request.user, number_id=number_id, caller_num=self.validated()["caller_num"]
        )
        return Response(
            BlockedCallerOutput(entry).data, status=http.HTTP_201_CREATED if created else 200
        )

    @extend_schema(
        operation_id="numbers_blocked_remove",
        request=BlockedCallerInput,
        responses={200: SuccessOutput, **errors(400, 401, 404, 415)},
    )
    @blocked.mapping.delete
    def blocked_remove(self, request, number_id):
        number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        services.blocked_caller_remove(
            user=request.user, number_id=number_id, caller_num=self.validated()["caller_num"]
        )
        return Response({"success": True})
