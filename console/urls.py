from django.urls import path

from console import views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("login", views.login, name="login"),
    path("register", views.register, name="register"),
    path("logout", views.logout, name="logout"),
    path("numbers", views.number_list, name="numbers"),
    path("numbers/new", views.number_create, name="number_create"),
    path("numbers/<str:number_id>/alias", views.number_alias, name="number_alias"),
    path("numbers/<str:number_id>/pin", views.number_pin, name="number_pin"),
    path("numbers/<str:number_id>/delete", views.number_delete, name="number_delete"),
]
