from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from captcha import services
from captcha.serializers import ChallengeOutput, TokenOutput, VerifyInput
from core import ratelimit
from core.clientip import client_ip
from core.schema import errors
from core.viewsets import ResourceViewSet


class CaptchaViewSet(ResourceViewSet):
    # `/api/captcha`: arithmetic challenges and their one-use tokens. Open to everyone.

    authentication_classes: list = []
    permission_classes = [AllowAny]
    input_serializers = {"verify": VerifyInput}

    @extend_schema(
        operation_id="captcha_issue", responses={200: ChallengeOutput, **errors(429)}, auth=[]
    )
    def list(self, request):
        ratelimit.hit("captcha-issue:ip", client_ip(request), settings.RATE_LIMIT_CAPTCHA_PER_IP)
        challenge = services.captcha_challenge_issue()
        return Response(ChallengeOutput(challenge).data)

    @extend_schema(
        operation_id="captcha_verify",
        request=VerifyInput,
        responses={200: TokenOutput, **errors(400, 415, 429)},
        auth=[],
    )
    @action(detail=False, methods=["post"])
    def verify(self, request):
        ratelimit.hit(
            "captcha-verify:ip", client_ip(request), settings.RATE_LIMIT_CAPTCHA_VERIFY_PER_IP
        )
        data = self.validated()
        token = services.captcha_verify(
            a=data["a"], b=data["b"], answer=data["answer"], challenge_id=data.get("challengeId")
        )
        return Response({"token": str(token.id)})
