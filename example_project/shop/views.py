from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from .forms import OrderForm
from .jobs import refresh_sales_report, send_receipt
from .models import Order, SalesReport


@require_http_methods(["GET", "POST"])
def place_order(request):
    """Take an order; the receipt and the sales report are left to the workers."""
    form = OrderForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        with transaction.atomic():  # the order and its jobs commit together, or none
            order = form.save()
            send_receipt.enqueue(order.pk)
            refresh_sales_report.enqueue(unique_key="sales-report")  # once for a burst
        messages.success(request, f"Order #{order.pk} placed; its receipt is on the way.")
        return redirect("place_order")
    orders = Order.objects.all()[:10]
    context = {"form": form, "orders": orders, "report": SalesReport.objects.first()}
    return render(request, "shop/place_order.html", context)
