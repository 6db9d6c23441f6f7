from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core.schema import SuccessOutput, errors
from core.viewsets import ResourceViewSet
from virtual_numbers import selectors, services
from virtual_numbers.serializers import (
    AliasInput,
    BlockedCallerInput,
    BlockedCallerOutput,
    BlocklistOutput,
    NumberCreateInput,
    NumberListOutput,
    NumberOutput,
    PinChangeInput,
)


class NumberViewSet(ResourceViewSet):
    # `/api/numbers`: the caller's numbers, their alias and their PIN.

    lookup_url_kwarg = "number_id"
    input_serializers = {
        "create": NumberCreateInput,
        "alias": AliasInput,
        "pin": PinChangeInput,
        "blocked_add": BlockedCallerInput,
        "blocked_remove": BlockedCallerInput,
    }

    def number(self):
        """The caller's number named in the path; 404 for anyone else's."""
        return selectors.number_access(user=self.request.user, number_id=self.kwargs["number_id"])

    @extend_schema(operation_id="numbers_list", responses={200: NumberListOutput, **errors(401)})
    def list(self, request):
        numbers = selectors.numbers_of(user=request.user)
        return Response({"numbers": NumberOutput(numbers, many=True).data})

    @extend_schema(
        operation_id="numbers_create",
        request=NumberCreateInput,
        responses={201: NumberOutput, **errors(400, 401, 409, 415, 503)},
    )
    def create(self, request):
        data = self.validated()
        number = services.number_create(
            user=request.user,
            alias=data["alias"],
            pin=data["pin"],
            captcha_token=data["captchaToken"],
        )
        return Response(NumberOutput(number).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="numbers_delete",
        request=None,
        responses={200: SuccessOutput, **errors(401, 404)},
    )
    def destroy(self, request, number_id):
        services.number_delete(number=self.number())
        return Response({"success": True})

    @extend_schema(
        operation_id="numbers_alias_set",
        request=AliasInput,
        responses={200: NumberOutput, **errors(400, 401, 404, 415)},
    )
    @action(detail=True, methods=["put"])
    def alias(self, request, number_id):
        number = self.number()  # 404 before 400
        number = services.number_alias_set(number=number, alias=self.validated()["alias"])
        return Response(NumberOutput(number).data)

    @extend_schema(
        operation_id="numbers_pin_change",
        request=PinChangeInput,
        responses={200: SuccessOutput, **errors(400, 401, 403, 404, 415, 429, 503)},
    )
    @action(detail=True, methods=["put"])
    def pin(self, request, number_id):
        number = self.number()  # 404 before 400
        data = self.validated()
        services.number_pin_change(
            number=number,
            current_pin=data["currentPin"],
            new_pin=data["newPin"],
        )
        return Response({"success": True})

    @extend_schema(
        operation_id="numbers_blocked_list", responses={200: BlocklistOutput, **errors(401, 404)}
    )
    @action(detail=True, methods=["get"])
    def blocked(self, request, number_id):
        entries = selectors.blocklist_of(number=self.number())
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
        number = self.number()  # 404 before 400
        entry, created = services.blocked_caller_add(
            number=number, caller_num=self.validated()["caller_num"]
        )
        return Response(
            BlockedCallerOutput(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="numbers_blocked_remove",
        request=BlockedCallerInput,
        responses={200: SuccessOutput, **errors(400, 401, 404, 415)},
    )
    @blocked.mapping.delete
    def blocked_remove(self, request, number_id):
        number = self.number()  # 404 before 400
        services.blocked_caller_remove(number=number, caller_num=self.validated()["caller_num"])
        return Response({"success": True})
