from rest_framework import serializers

from accounts.serializers import MatrixStatusField


class MatrixIdSetOutput(serializers.Serializer):
    success = serializers.BooleanField()
    matrixId = serializers.CharField(allow_null=True)  # noqa: N815
    matrixStatus = MatrixStatusField()  # noqa: N815
