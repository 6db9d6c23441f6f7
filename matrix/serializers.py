from rest_framework import serializers

from accounts.serializers import MatrixStatusField
from core.fields import SuccessField


class MatrixIdSetOutput(serializers.Serializer):
    # Renders the User.
    success = SuccessField()
    matrixId = serializers.CharField(source="matrix_id", allow_null=True)  # noqa: N815
    matrixStatus = MatrixStatusField(source="matrix_status")  # noqa: N815
