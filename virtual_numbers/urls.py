from django.urls import path

from virtual_numbers import views

urlpatterns = [
    path("numbers", views.NumberCollectionView.as_view(), name="numbers"),
    path("numbers/<str:number_id>", views.NumberView.as_view(), name="number"),
    path("numbers/<str:number_id>/alias", views.NumberAliasView.as_view(), name="number-alias"),
    path("numbers/<str:number_id>/pin", views.NumberPinView.as_view(), name="number-pin"),
]
