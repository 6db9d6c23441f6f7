from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.serializers import SuccessOutput
from relay.schema import errors
from relay.viewsets import ResourceViewSet
from virtual_numbers import selectors, services
from virtual_numbers.serializers import (
    AliasInput,
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
    }

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
        services.number_delete(user=request.user, number_id=number_id)
        return Response({"success": True})

    @extend_schema(
        operation_id="numbers_alias_set",
        request=AliasInput,
        responses={200: NumberOutput, **errors(400, 401, 404, 415)},
    )
    @action(detail=True, methods=["put"])
    def alias(self, request, number_id):
        services.number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        number = services.number_alias_set(
            user=request.user, number_id=number_id, alias=self.validated()["alias"]
        )
        return Response(NumberOutput(number).data)

    @extend_schema(
        operation_id="numbers_pin_change",
        request=PinChangeInput,
        responses={200: SuccessOutput, **errors(400, 401, 403, 404, 415, 429)},
    )
    @action(detail=True, methods=["put"])
    def pin(self, request, number_id):
        services.number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        data = self.validated()
        services.number_pin_change(
            user=request.user,
            number_id=number_id,
            current_pin=data["currentPin"],
            new_pin=data["newPin"],
        )
        return Response({"success": True})
