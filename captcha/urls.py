from captcha import views
from relay.viewsets import Router

router = Router()
router.register("captcha", views.CaptchaViewSet, basename="captcha")

urlpatterns = router.urls
