from accounts.serializers import MatrixIdInput
from core.errors import ErrorCode
from core.schema import operation
from core.viewsets import ResourceViewSet
from matrix import services
from matrix.serializers import MatrixIdSetOutput


class MatrixIdViewSet(ResourceViewSet):
    # `/api/user/matrix`: the caller's Matrix id, and with it the bot's direct room.

    input_serializers = {"set": MatrixIdInput}

    @operation(
        "user_matrix_set",
        summary="Set or clear your Matrix id",
        description="When Matrix is on, the id must exist on its homeserver; the bot then "
        "invites it to a direct room and sends nothing until you join (matrixStatus). "
        "A new id, or null, ends the old room's use.",
        request=(MatrixIdInput, {"matrixId": "@me:matrix.example.com"}),
        responses={
            200: (
                MatrixIdSetOutput,
                {"success": True, "matrixId": "@me:matrix.example.com", "matrixStatus": "invited"},
            )
        },
        errors=[ErrorCode.INVALID_REQUEST, ErrorCode.RATE_LIMITED, ErrorCode.MATRIX_UNAVAILABLE],
    )
    def set(self, request):
        user = services.matrix_id_set(user=request.user, matrix_id=self.validated()["matrixId"])
        return self.answer(MatrixIdSetOutput, user)
