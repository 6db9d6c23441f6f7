from accounts import views
from core.viewsets import Router

router = Router()
router.register("auth", views.AuthViewSet, basename="auth")
router.register("user/sessions", views.SessionViewSet, basename="user-session")
router.register("user", views.UserViewSet, basename="user")
router.register("dashboard", views.DashboardViewSet, basename="dashboard")

urlpatterns = router.urls
