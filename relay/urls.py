from django.contrib import admin
from django.urls import include, path
from django.views.decorators.http import require_GET
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from relay.health import healthz
from relay.metrics import metrics_view

handler400 = "core.errors.handler400"
handler403 = "core.errors.handler403"
handler404 = "core.errors.handler404"
handler500 = "core.errors.handler500"

urlpatterns = [
    path("healthz", require_GET(healthz), name="healthz"),
    path("metrics", require_GET(metrics_view), name="metrics"),
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/", include("webhooks.urls")),  # before accounts: user/webhook, not user/<id>
    path("api/", include("matrix.urls")),  # before accounts: user/matrix
    path("api/", include("accounts.urls")),
    path("api/", include("captcha.urls")),
    path("api/", include("voiceapps.urls")),  # before numbers: numbers/<id>/voice
    path("api/", include("virtual_numbers.urls")),
    path("api/", include("history.urls")),
    path("api/", include("realtime.urls")),
    path("admin/", admin.site.urls),
    path("", include("console.urls")),  # last: the console's pages for people
]
