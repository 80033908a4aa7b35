"""The URLs bench/growth.py's rounds load: the admin, and the database gauges' view."""

from django.contrib import admin
from django.urls import path

from django_dbjobs.observability.gauges_view import metrics_view

urlpatterns = [path("admin/", admin.site.urls), path("dbjobs/metrics", metrics_view)]
