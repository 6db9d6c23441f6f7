from core.viewsets import Router
from virtual_numbers import views

router = Router()
router.register("numbers", views.NumberViewSet, basename="number")

urlpatterns = router.urls
