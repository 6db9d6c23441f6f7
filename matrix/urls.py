from django.urls import path

from matrix.views import MatrixIdViewSet

urlpatterns = [
    path("user/matrix", MatrixIdViewSet.as_view({"put": "set"}), name="user-matrix"),
]
