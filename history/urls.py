from core.viewsets import Router
from history import views

router = Router()
router.register("history", views.HistoryViewSet, basename="history")
router.register("recordings", views.CallRecordingViewSet, basename="recordings")

urlpatterns = router.urls
