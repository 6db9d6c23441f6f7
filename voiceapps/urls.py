from django.urls import path

from voiceapps.views import VoiceAppViewSet

urlpatterns = [
    path(
        "numbers/<str:number_id>/voice",
        VoiceAppViewSet.as_view({"get": "show", "put": "set", "delete": "remove"}),
        name="number-voice",
    ),
]
