"""The shop's jobs: a receipt email per order, the sales report, and a daily summary."""

import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Count, Sum
from django.utils import timezone

from django_dbjobs import job

from .models import Order, SalesReport


@job(queue="emails", max_attempts=5)
def send_receipt(order_id: int) -> dict:
    """Email the receipt of an order and stamp it as sent."""
    order = Order.objects.get(pk=order_id)
    if order.receipt_sent_at is None:  # a job may run twice; email once
        # A mail server error raises here: the attempt fails and the queue retries it
        # with backoff, up to max_attempts, then keeps it as a dead letter.
        send_mail(
            subject=f"Your order #{order.pk}",
            message=f"Thank you for your order: {order.quantity} × {order.item}.",
            from_email=None,  # settings.DEFAULT_FROM_EMAIL
            recipient_list=[order.email],
        )
        order.receipt_sent_at = timezone.now()
        order.save(update_fields=["receipt_sent_at"])
    return {"sent_to": order.email}


@job(queue="reports")
def refresh_sales_report() -> dict:
    """Count the orders per item into the one SalesReport row.

    Enqueued with unique_key="sales-report": a burst of orders queues it once. The key
    is held while it runs too, so an order placed meanwhile waits for the next refresh.
    """
    counts = dict(Order.objects.order_by("item").values_list("item").annotate(Count("pk")))
    SalesReport.objects.update_or_create(
        pk=1, defaults={"orders_per_item": counts, "computed_at": timezone.now()}
    )
    return counts


@job(queue="reports")
def daily_sales(due_time: str) -> dict:
    """Count the orders of the day before `due_time`, a day in the shop's timezone.

    Run by the "daily-sales" schedule (settings.DBJOBS_SCHEDULES), which passes its due
    time: a run that starts late, after an outage, still reports on the right day.
    """
    shop_timezone = ZoneInfo(settings.SHOP_TIMEZONE)
    today = datetime.datetime.fromisoformat(due_time).astimezone(shop_timezone).date()
    yesterday = today - datetime.timedelta(days=1)
    orders = Order.objects.filter(
        created_at__gte=datetime.datetime.combine(yesterday, datetime.time(), shop_timezone),
        created_at__lt=datetime.datetime.combine(today, datetime.time(), shop_timezone),
    )
    totals = orders.aggregate(orders=Count("pk"), units=Sum("quantity"))
    return {"day": yesterday.isoformat(), "orders": totals["orders"], "units": totals["units"] or 0}
