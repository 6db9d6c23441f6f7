from django.urls import path

from history import views

urlpatterns = [
    path("history", views.HistoryView.as_view(), name="history"),
    path("numbers/<str:number_id>/blocked", views.BlocklistView.as_view(), name="number-blocked"),
]
