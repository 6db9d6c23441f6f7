from django.conf import settings
from django.http.request import split_domain_port
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

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
)
from core.clientip import client_ip
from core.errors import InvalidRequest
from core.schema import SuccessOutput, errors
from core.viewsets import ResourceViewSet


class AuthViewSet(ResourceViewSet):
    # `/api/auth/*`: register and log in (open to everyone), log out (the current session).

    input_serializers = {"register": RegisterInput, "login": CredentialsInput}

    def _open_session(self, scope: str, service, status_code: int) -> Response:
        """Rate-limit by IP and e-mail before anything else, then validate and call `service`
        (register or login), answering the token and the user."""
        request = self.request
        data = request.data if isinstance(request.data, dict) else {}
        services.auth_rate_limit(
            scope=scope, ip=client_ip(request), email=str(data.get("email", "")).lower()
        )
        result = service(**self.validated())
        body = AuthOutput({"token": result.token, "user": result.user}).data
        return Response(body, status=status_code)

    @extend_schema(
        operation_id="auth_register",
        request=RegisterInput,
        responses={201: AuthOutput, **errors(400, 409, 415, 429, 503)},
        auth=[],
    )
    @action(
        detail=False, methods=["post"], authentication_classes=[], permission_classes=[AllowAny]
    )
    def register(self, request):
        return self._open_session("register", services.user_register, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="auth_login",
        request=CredentialsInput,
        responses={200: AuthOutput, **errors(400, 401, 415, 429, 503)},
        auth=[],
    )
    @action(
        detail=False, methods=["post"], authentication_classes=[], permission_classes=[AllowAny]
    )
    def login(self, request):
        return self._open_session("login", services.user_login, status.HTTP_200_OK)

    @extend_schema(
        operation_id="auth_logout",
        request=None,
        responses={200: SuccessOutput, **errors(400, 401)},
    )
    @action(detail=False, methods=["post"])
    def logout(self, request):
        if not isinstance(request.auth, LoginSession):
            raise InvalidRequest(
                "An API key has no session to end; regenerate the key to revoke it."
            )
        services.session_end(session=request.auth)
        return Response({"success": True})


class UserViewSet(ResourceViewSet):
    # `/api/user/*`: the caller's profile, Matrix id and API key.

    input_serializers = {"matrix": MatrixIdInput}

    @extend_schema(operation_id="user_me", responses={200: MeOutput, **errors(401)})
    @action(detail=False, methods=["get"])
    def me(self, request):
        return Response(MeOutput(request.user).data)

    @extend_schema(
        operation_id="user_matrix_set",
        request=MatrixIdInput,
        responses={200: MatrixIdOutput, **errors(400, 401, 415)},
    )
    @action(detail=False, methods=["put"])
    def matrix(self, request):
        user = services.user_matrix_id_set(
            user=request.user, matrix_id=self.validated()["matrixId"]
        )
        return Response({"success": True, "matrixId": user.matrix_id})

    @extend_schema(
        operation_id="user_api_key_regenerate",
        request=None,
        responses={200: ApiKeyOutput, **errors(401)},
    )
    @action(detail=False, methods=["post"], url_path="regenerate-api-key")
    def regenerate_api_key(self, request):
        return Response({"apiKey": services.user_api_key_regenerate(user=request.user)})


class SessionViewSet(ResourceViewSet):
    # `/api/user/sessions/:id`: end one of the caller's login sessions.

    lookup_url_kwarg = "session_id"

    @extend_schema(
        operation_id="user_session_end",
        request=None,
        responses={200: SuccessOutput, **errors(401, 404)},
    )
    def destroy(self, request, session_id):
        services.session_end_for_user(user=request.user, session_id=session_id)
        return Response({"success": True})


def ws_base_url(request) -> str:
    """PUBLIC_WS_URL when set; else the request's own host, at WS_PORT when the socket server
    listens on a port of its own (runrelay), else at the request's port (a proxy routes /ws)."""
    if settings.PUBLIC_WS_URL:
        return settings.PUBLIC_WS_URL.rstrip("/")
    scheme = "wss" if request.is_secure() else "ws"
    host = request.get_host()
    if settings.WS_PORT:
        name, _port = split_domain_port(host)  # an IPv6 literal keeps its brackets
        host = f"{name}:{settings.WS_PORT}"
    return f"{scheme}://{host}"


class DashboardViewSet(ResourceViewSet):
    # `/api/dashboard`: profile, API key, a ready WebSocket URL and the newest sessions.

    @extend_schema(operation_id="dashboard", responses={200: DashboardOutput, **errors(401)})
    def list(self, request):
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
