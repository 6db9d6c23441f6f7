from captcha import views
from core.viewsets import Router

router = Router()
router.register("captcha", views.CaptchaViewSet, basename="captcha")

urlpatterns = router.urls
