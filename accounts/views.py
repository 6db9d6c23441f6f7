from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import selectors, services
from accounts.models import LoginSession
from accounts.serializers import (
    ApiKeyOutput,
    AuthOutput,
    CredentialsInput,
    DashboardOutput,
    MatrixIdInput,
    MatrixIdOutput,
    MeOutput,
    RegisterInput,
    SessionOutput,
    SuccessOutput,
)
from relay.clientip import client_ip
from relay.errors import InvalidRequest
from relay.schema import errors


def auth_body(result: services.AuthResult) -> dict:
    return AuthOutput({"token": result.token, "user": result.user}).data


class RegisterView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="auth_register",
        request=RegisterInput,
        responses={201: AuthOutput, **errors(400, 409, 415, 429)},
        auth=[],
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        services.auth_rate_limit(
            scope="register", ip=client_ip(request), email=str(data.get("email", "")).lower()
        )
        body = RegisterInput(data=request.data)
        body.is_valid(raise_exception=True)
        result = services.user_register(**body.validated_data)
        return Response(auth_body(result), status=status.HTTP_201_CREATED)


class LoginView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="auth_login",
        request=CredentialsInput,
        responses={200: AuthOutput, **errors(400, 401, 415, 429)},
        auth=[],
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        services.auth_rate_limit(
            scope="login", ip=client_ip(request), email=str(data.get("email", "")).lower()
        )
        body = CredentialsInput(data=request.data)
        body.is_valid(raise_exception=True)
        result = services.user_login(**body.validated_data)
        return Response(auth_body(result))


class LogoutView(APIView):
    @extend_schema(
        operation_id="auth_logout",
        request=None,
        responses={200: SuccessOutput, **errors(400, 401)},
    )
    def post(self, request):
        if not isinstance(request.auth, LoginSession):
            raise InvalidRequest(
                "An API key has no session to end; regenerate the key to revoke it."
            )
        services.session_end(session=request.auth)
        return Response({"success": True})


class MeView(APIView):
    @extend_schema(operation_id="user_me", responses={200: MeOutput, **errors(401)})
    def get(self, request):
        return Response(MeOutput(request.user).data)


class MatrixIdView(APIView):
    @extend_schema(
        operation_id="user_matrix_set",
        request=MatrixIdInput,
        responses={200: MatrixIdOutput, **errors(400, 401, 415)},
    )
    def put(self, request):
        body = MatrixIdInput(data=request.data)
        body.is_valid(raise_exception=True)
        user = services.user_matrix_id_set(
            user=request.user, matrix_id=body.validated_data["matrixId"]
        )
        return Response({"success": True, "matrixId": user.matrix_id})


class RegenerateApiKeyView(APIView):
    @extend_schema(
        operation_id="user_api_key_regenerate",
        request=None,
        responses={200: ApiKeyOutput, **errors(401)},
    )
    def post(self, request):
        return Response({"apiKey": services.user_api_key_regenerate(user=request.user)})


class SessionEndView(APIView):
    @extend_schema(
        operation_id="user_session_end",
        request=None,
        responses={200: SuccessOutput, **errors(401, 404)},
    )
    def delete(self, request, session_id):
        services.session_end_for_user(user=request.user, session_id=session_id)
        return Response({"success": True})


def ws_base_url(request) -> str:
    if settings.PUBLIC_WS_URL:
        return settings.PUBLIC_WS_URL.rstrip("/")
    scheme = "wss" if request.is_secure() else "ws"
    return f"{scheme}://{request.get_host()}"


class DashboardView(APIView):
    @extend_schema(operation_id="dashboard", responses={200: DashboardOutput, **errors(401)})
    def get(self, request):
        user = request.user
        jwt = getattr(request, "jwt", None)
        if jwt is None:
            # Called with an API key: the socket needs a JWT, so open a session for it.
            jwt = services.session_open(user=user).token
        body = {
            "email": user.email,
            "plan": user.plan,
            "matrixId": user.matrix_id,
            "apiKey": user.api_key,
            "wsUrl": f"{ws_base_url(request)}/ws?token={jwt}",
            "sessions": SessionOutput(selectors.sessions_newest(user=user), many=True).data,
        }
        return Response(body)
