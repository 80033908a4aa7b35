from django.contrib import admin
from django.urls import path

from django_dbjobs.observability.gauges_view import metrics_view
from tests import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dbjobs/metrics", metrics_view),
    path("enqueue/", views.enqueue_a_job),
]
