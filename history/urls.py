from history import views
from relay.viewsets import Router

router = Router()
router.register("history", views.HistoryViewSet, basename="history")
router.register("numbers", views.BlocklistViewSet, basename="number-blocklist")

urlpatterns = router.urls
