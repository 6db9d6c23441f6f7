from core.viewsets import Router
from virtual_numbers import views

router = Router()
router.register("numbers", views.NumberViewSet, basename="number")
router.register("invitations", views.InvitationViewSet, basename="invitation")

urlpatterns = router.urls
