from django.contrib import admin
from django.urls import path
from shop.views import place_order

urlpatterns = [
    path("", place_order, name="place_order"),
    path("admin/", admin.site.urls),
]
