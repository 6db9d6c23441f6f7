from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.serializers import SuccessOutput
from relay.schema import errors
from virtual_numbers import selectors, services
from virtual_numbers.serializers import (
    AliasInput,
    NumberCreateInput,
    NumberListOutput,
    NumberOutput,
    PinChangeInput,
)


class NumberCollectionView(APIView):
    @extend_schema(operation_id="numbers_list", responses={200: NumberListOutput, **errors(401)})
    def get(self, request):
        numbers = selectors.numbers_of(user=request.user)
        return Response({"numbers": NumberOutput(numbers, many=True).data})

    @extend_schema(
        operation_id="numbers_create",
        request=NumberCreateInput,
        responses={201: NumberOutput, **errors(400, 401, 409, 415, 503)},
    )
    def post(self, request):
        body = NumberCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        number = services.number_create(
            user=request.user,
            alias=data["alias"],
            pin=data["pin"],
            captcha_token=data["captchaToken"],
        )
        return Response(NumberOutput(number).data, status=status.HTTP_201_CREATED)


class NumberView(APIView):
    @extend_schema(
        operation_id="numbers_delete",
        request=None,
        responses={200: SuccessOutput, **errors(401, 404)},
    )
    def delete(self, request, number_id):
        services.number_delete(user=request.user, number_id=number_id)
        return Response({"success": True})


class NumberAliasView(APIView):
    @extend_schema(
        operation_id="numbers_alias_set",
        request=AliasInput,
        responses={200: NumberOutput, **errors(400, 401, 404, 415)},
    )
    def put(self, request, number_id):
        services.number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        body = AliasInput(data=request.data)
        body.is_valid(raise_exception=True)
        number = services.number_alias_set(
            user=request.user, number_id=number_id, alias=body.validated_data["alias"]
        )
        return Response(NumberOutput(number).data)


class NumberPinView(APIView):
    @extend_schema(
        operation_id="numbers_pin_change",
        request=PinChangeInput,
        responses={200: SuccessOutput, **errors(400, 401, 403, 404, 415, 429)},
    )
    def put(self, request, number_id):
        services.number_get_owned(user=request.user, number_id=number_id)  # 404 before 400
        body = PinChangeInput(data=request.data)
        body.is_valid(raise_exception=True)
        services.number_pin_change(
            user=request.user,
            number_id=number_id,
            current_pin=body.validated_data["currentPin"],
            new_pin=body.validated_data["newPin"],
        )
        return Response({"success": True})
