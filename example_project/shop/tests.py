"""The shop's tests, in Django's test runner style: `python manage.py test shop`.

django_dbjobs.testing runs the jobs in the test's own thread and transaction, and captures
what a request enqueued.
"""

import datetime
from smtplib import SMTPServerDisconnected
from unittest import mock

from django.contrib.auth.models import User
from django.core import mail
from django.test import TestCase
from django.urls import reverse

from django_dbjobs.models import Job, JobStatus
from django_dbjobs.testing import capture_jobs, run_jobs

from .jobs import daily_sales, send_receipt
from .models import Order, SalesReport

ORDER = {"email": "ada@example.com", "item": "teapot", "quantity": 2}


class PlaceOrderTests(TestCase):
    def place(self, **fields):
        return self.client.post(reverse("place_order"), {**ORDER, **fields}, follow=True)

    def test_the_page_shows_the_form_and_the_latest_orders(self):
        Order.objects.create(email="bob@example.com", item="kettle", quantity=1)
        response = self.client.get(reverse("place_order"))
        self.assertContains(response, 'name="email"')
        self.assertContains(response, "kettle")

    def test_an_order_enqueues_its_receipt_and_the_sales_report(self):
        with capture_jobs() as captured:
            response = self.place()
        order = Order.objects.get()
        self.assertRedirects(response, reverse("place_order"))
        self.assertContains(response, f"Order #{order.pk} placed")
        self.assertEqual(captured.names, ["shop.jobs.send_receipt", "shop.jobs.refresh_sales_report"])
        receipt, report = captured
        self.assertEqual((receipt.args, receipt.queue, receipt.max_attempts), ([order.pk], "emails", 5))
        self.assertEqual((report.unique_key, report.queue), ("sales-report", "reports"))

    def test_running_the_jobs_sends_the_receipt_and_counts_the_order(self):
        self.place()
        ran = run_jobs()
        self.assertEqual([job.status for job in ran], [JobStatus.SUCCESSFUL] * 2)
        self.assertEqual(ran[0].return_value, {"sent_to": "ada@example.com"})
        self.assertEqual(len(mail.outbox), 1)
        self.assertEqual(mail.outbox[0].to, ["ada@example.com"])
        self.assertIn("2 × teapot", mail.outbox[0].body)
        self.assertIsNotNone(Order.objects.get().receipt_sent_at)
        self.assertEqual(SalesReport.objects.get().orders_per_item, {"teapot": 1})
        self.assertContains(self.client.get(reverse("place_order")), "teapot: 1")

    def test_a_form_error_stores_and_enqueues_nothing(self):
        with capture_jobs() as captured:
            response = self.place(email="not an address", quantity=0)
        self.assertEqual(response.status_code, 200)
        self.assertFormError(response.context["form"], "email", "Enter a valid email address.")
        self.assertFalse(Order.objects.exists())
        self.assertEqual(captured, [])
        self.assertFalse(Job.objects.exists())

    def test_a_burst_of_orders_queues_one_sales_report(self):
        with capture_jobs() as captured:
            self.place()
            self.place(item="kettle")
        self.assertEqual(len(captured.named("shop.jobs.send_receipt")), 2)
        self.assertEqual(len(captured.named("shop.jobs.refresh_sales_report")), 1)
        self.assertEqual(Job.objects.filter(name="shop.jobs.refresh_sales_report").count(), 1)
        run_jobs()
        self.assertEqual(SalesReport.objects.get().orders_per_item, {"kettle": 1, "teapot": 1})
        self.place()  # the report ran, so the key is free: the next order queues it again
        self.assertEqual(Job.objects.filter(name="shop.jobs.refresh_sales_report").count(), 2)


class SendReceiptTests(TestCase):
    def setUp(self):
        self.order = Order.objects.create(**ORDER)

    def test_a_mail_server_error_is_retried(self):
        job = send_receipt.enqueue(self.order.pk)
        down = SMTPServerDisconnected("Connection unexpectedly closed")
        with mock.patch("shop.jobs.send_mail", side_effect=down), self.assertLogs("django_dbjobs") as logs:
            self.assertEqual([attempt.status for attempt in run_jobs()], [JobStatus.READY])
        self.assertIn("Job will retry", logs.output[0])
        self.assertEqual(mail.outbox, [])
        self.assertIsNone(Order.objects.get().receipt_sent_at)
        run_jobs(include_scheduled=True)  # the retry is due after its backoff: run it now
        job.refresh_from_db()
        self.assertEqual((job.status, job.attempts), (JobStatus.SUCCESSFUL, 2))
        self.assertIn("SMTPServerDisconnected", job.errors[0]["summary"])
        self.assertEqual(len(mail.outbox), 1)
        self.assertIsNotNone(Order.objects.get().receipt_sent_at)

    def test_a_receipt_is_sent_once_when_the_job_runs_again(self):
        send_receipt(self.order.pk)
        send_receipt(self.order.pk)
        self.assertEqual(len(mail.outbox), 1)


class DailySalesTests(TestCase):
    def test_counts_the_day_before_the_due_time_in_the_shop_timezone(self):
        paris = datetime.timezone(datetime.timedelta(hours=1))  # Paris in winter: UTC+1
        for placed, quantity in [
            (datetime.datetime(2025, 1, 14, 23, 59, tzinfo=paris), 1),  # the day before
            (datetime.datetime(2025, 1, 15, 0, 0, tzinfo=paris), 2),
            (datetime.datetime(2025, 1, 15, 23, 59, tzinfo=paris), 3),
            (datetime.datetime(2025, 1, 16, 0, 0, tzinfo=paris), 4),  # the day itself
        ]:
            order = Order.objects.create(**{**ORDER, "quantity": quantity})
            Order.objects.filter(pk=order.pk).update(created_at=placed)
        # 07:00 in Paris on January 16th, as the "daily-sales" schedule passes it: UTC.
        summary = daily_sales("2025-01-16T06:00:00+00:00")
        self.assertEqual(summary, {"day": "2025-01-15", "orders": 2, "units": 5})


class AdminTests(TestCase):
    def test_the_order_list_loads_for_a_superuser(self):
        Order.objects.create(**ORDER)
        Order.objects.create(email="bob@example.com", item="kettle", quantity=1)
        self.client.force_login(User.objects.create_superuser("admin", "admin@example.com", "password"))
        response = self.client.get(reverse("admin:shop_order_changelist"), {"q": "teapot"})
        self.assertContains(response, "ada@example.com")
        self.assertNotContains(response, "bob@example.com")
