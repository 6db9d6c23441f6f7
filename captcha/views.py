from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from captcha import services
from captcha.serializers import ChallengeOutput, TokenOutput, VerifyInput
from core.clientip import client_ip
from core.errors import ErrorCode
from core.schema import operation
from core.viewsets import ResourceViewSet

CHALLENGE_ID = "0d6b1f7e-2c3a-4e5d-8f9a-b1c2d3e4f5a6"


class CaptchaViewSet(ResourceViewSet):
    # `/api/captcha`: arithmetic challenges and their one-use tokens. Open to everyone.

    authentication_classes: list = []
    permission_classes = [AllowAny]
    input_serializers = {"verify": VerifyInput}

    @operation(
        "captcha_issue",
        summary="Get an addition to solve",
        description="The challenge is kept 5 minutes. Rate limited per client IP "
        "(`RATE_LIMIT_CAPTCHA_PER_IP`).",
        responses={
            200: (
                ChallengeOutput,
                {"a": 12, "b": 30, "question": "12 + 30 = ?", "challengeId": CHALLENGE_ID},
            )
        },
        errors=[ErrorCode.RATE_LIMITED],
        authenticated=False,
    )
    def list(self, request):
        services.captcha_issue_rate_limit(ip=client_ip(request))
        challenge = services.captcha_challenge_issue()
        return Response(ChallengeOutput(challenge).data)

    @operation(
        "captcha_verify",
        summary="Answer a challenge for a token",
        description="Any answer spends the challenge. A right one gives a token for "
        "`POST /api/numbers`, single use and valid 10 minutes; a wrong one is 400 "
        "`captcha_wrong_answer`, an unknown, spent or expired challenge 400 `captcha_invalid`. "
        "Rate limited per client IP (`RATE_LIMIT_CAPTCHA_VERIFY_PER_IP`).",
        request=(VerifyInput, {"a": 12, "b": 30, "answer": 42, "challengeId": CHALLENGE_ID}),
        responses={200: (TokenOutput, {"token": "3c9e7a51-0b2d-4f6e-8a1c-5d4e3f2a1b0c"})},
        errors=[ErrorCode.CAPTCHA_WRONG_ANSWER, ErrorCode.CAPTCHA_INVALID, ErrorCode.RATE_LIMITED],
        authenticated=False,
    )
    @action(detail=False, methods=["post"])
    def verify(self, request):
        services.captcha_verify_rate_limit(ip=client_ip(request))
        data = self.validated()
        token = services.captcha_verify(
            a=data["a"], b=data["b"], answer=data["answer"], challenge_id=data.get("challengeId")
        )
        return Response({"token": str(token.id)})
