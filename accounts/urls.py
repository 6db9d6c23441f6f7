from django.urls import path

from accounts import views

urlpatterns = [
    path("auth/register", views.RegisterView.as_view(), name="auth-register"),
    path("auth/login", views.LoginView.as_view(), name="auth-login"),
    path("auth/logout", views.LogoutView.as_view(), name="auth-logout"),
    path("user/me", views.MeView.as_view(), name="user-me"),
    path("user/matrix", views.MatrixIdView.as_view(), name="user-matrix"),
    path(
        "user/regenerate-api-key",
        views.RegenerateApiKeyView.as_view(),
        name="user-regenerate-api-key",
    ),
    path("user/sessions/<str:session_id>", views.SessionEndView.as_view(), name="user-session"),
    path("dashboard", views.DashboardView.as_view(), name="dashboard"),
]
