"""Field sets the interface document spells out, shared by the endpoints' tests and the
schema's, so that both hold the server to one list."""

ME_FIELDS = {
    "id",
    "email",
    "plan",
    "matrixId",
    "matrixStatus",
    "matrixInbound",
    "matrixOutbound",
    "createdAt",
    "twoFactor",
    "emailVerified",
    "pendingEmail",
    "quotas",
}
DASHBOARD_FIELDS = {
    "email",
    "plan",
    "matrixId",
    "matrixStatus",
    "apiKey",
    "emailVerified",
    "wsUrl",
    "sessions",
}
