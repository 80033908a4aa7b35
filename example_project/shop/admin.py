from django.contrib import admin

from .models import Order, SalesReport


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "email", "item", "quantity", "created_at", "receipt_sent_at"]
    search_fields = ["email", "item"]
    list_filter = [("receipt_sent_at", admin.EmptyFieldListFilter)]  # "Empty": not sent yet


@admin.register(SalesReport)
class SalesReportAdmin(admin.ModelAdmin):
    list_display = ["computed_at", "orders_per_item"]
