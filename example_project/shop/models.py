from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Order(models.Model):
    email = models.EmailField()
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(99)]
    )
    created_at = models.DateTimeField(auto_now_add=True)
    receipt_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Order #{self.pk}: {self.quantity} × {self.item} for {self.email}"


class SalesReport(models.Model):
    """Orders per item, recomputed by the refresh_sales_report job; there is one row."""

    orders_per_item = models.JSONField(default=dict)
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"Sales report of {self.computed_at:%Y-%m-%d %H:%M:%S}"
