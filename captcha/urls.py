from django.urls import path

from captcha import views

urlpatterns = [
    path("captcha", views.ChallengeView.as_view(), name="captcha"),
    path("captcha/verify", views.VerifyView.as_view(), name="captcha-verify"),
]
