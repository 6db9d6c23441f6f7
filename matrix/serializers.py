from rest_framework import serializers

from accounts.serializers import MATRIX_STATUSES


class MatrixIdSetOutput(serializers.Serializer):
    success = serializers.BooleanField()
    matrixId = serializers.CharField(allow_null=True)  # noqa: N815
    matrixStatus = serializers.ChoiceField(  # noqa: N815
        choices=MATRIX_STATUSES,
        help_text="none: no Matrix id (or Matrix is off); invited: the bot's invite waits "
        "for you; joined: you get notices and may type commands; left: nothing is sent",
    )
