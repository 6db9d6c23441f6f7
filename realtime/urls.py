from core.viewsets import Router
from realtime import views


class CallRouter(Router):
    """A call's id may contain slashes, so `calls/<id>/cancel` would also match the detail
    route `calls/<id>`: the actions on one call are matched before the call itself."""

    routes = [*Router.routes[:2], Router.routes[3], Router.routes[2]]


router = CallRouter()
router.register("calls", views.CallViewSet, basename="call")

urlpatterns = router.urls
