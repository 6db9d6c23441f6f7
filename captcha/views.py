from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from captcha import services
from captcha.serializers import ChallengeOutput, TokenOutput, VerifyInput
from relay import ratelimit
from relay.clientip import client_ip
from relay.schema import errors


class ChallengeView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="captcha_issue", responses={200: ChallengeOutput, **errors(429)}, auth=[]
    )
    def get(self, request):
        ratelimit.hit("captcha-issue:ip", client_ip(request), settings.RATE_LIMIT_CAPTCHA_PER_IP)
        challenge = services.captcha_challenge_issue()
        return Response(ChallengeOutput(challenge).data)


class VerifyView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="captcha_verify",
        request=VerifyInput,
        responses={200: TokenOutput, **errors(400, 415, 429)},
        auth=[],
    )
    def post(self, request):
        ratelimit.hit(
            "captcha-verify:ip", client_ip(request), settings.RATE_LIMIT_CAPTCHA_VERIFY_PER_IP
        )
        body = VerifyInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        token = services.captcha_verify(
            a=data["a"], b=data["b"], answer=data["answer"], challenge_id=data.get("challengeId")
        )
        return Response({"token": str(token.id)})
