from django.urls import path, re_path

from realtime import views

urlpatterns = [
    path("calls", views.CallCollectionView.as_view(), name="calls"),
    # callId is the client's string: it may contain anything but control characters, so the
    # cancel route is matched first and the detail route takes the rest of the path.
    re_path(r"^calls/(?P<call_id>.+)/cancel$", views.CallCancelView.as_view(), name="call-cancel"),
    path("calls/<path:call_id>", views.CallView.as_view(), name="call"),
]
