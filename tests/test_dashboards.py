"""The Grafana dashboard and the alert rules of docs/observability/ name only series the package exposes."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from django_dbjobs import enqueue
from django_dbjobs.observability import run_hooks
from django_dbjobs.observability.worker_metrics import WorkerMetrics
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker import Worker
from tests import jobs
from tests.gauges_helpers import known_rows
from tests.prometheus_server import OPT_IN

FILES = Path(__file__).resolve().parent.parent / "docs" / "observability"
DASHBOARD = FILES / "grafana-dashboard.json"
ALERTS = FILES / "alerts.yml"
TOKEN = "dashboard-test-token"
#: A series name in a PromQL expression (a dbjobs_ name not followed by a label matcher's "=").
SERIES = re.compile(r"\b(dbjobs_[a-z_]+)\b(?!\s*=)")


def expressions() -> dict[str, list[str]]:
    """Every PromQL expression of the dashboard and of the alert rules, by where it is."""
    found: dict[str, list[str]] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        found[f"panel {panel['title']!r}"] = [target["expr"] for target in panel["targets"]]
    # The rule file's expressions, read without a YAML library: "expr:" then the lines indented under it.
    lines = ALERTS.read_text().splitlines()
    for number, line in enumerate(lines):
        if line.strip().startswith("expr:"):
            indent = len(line) - len(line.lstrip())
            text = [line.split("expr:", 1)[1]]
            for following in lines[number + 1 :]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                text.append(following)
            found[f"alert rule at line {number + 1}"] = [" ".join(text).replace(">-", " ")]
    return found


@pytest.fixture
def exposed(settings) -> set[str]:
    """The sample names the worker's metrics and the database gauges' view expose after a small workload."""
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    known_rows(settings)  # every kind of row a gauge reads: keys, a rated queue, a batch, workers
    collectors = CollectorRegistry()
    metrics = WorkerMetrics(collectors)
    metrics.hook()
    try:
        enqueue(jobs.add, 1, 2)
        enqueue(jobs.always_fails)
        run_jobs(["default"], include_scheduled=True)
        enqueue(jobs.swallows_exceptions)  # timed out (a worker's timeout): the timed-out series
        Worker(burst=True, concurrency=1).run()
    finally:
        metrics.unhook()
    names = {sample.name for family in collectors.collect() for sample in family.samples}
    response = Client().get("/dbjobs/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.content.decode()):
        names.update(sample.name for sample in family.samples)
    return names


@pytest.mark.django_db(transaction=True)
def test_every_series_the_dashboard_and_the_alerts_read_exists(exposed):
    assert run_hooks._wrappers == [] and run_hooks._listeners == []  # unhooked: nothing left behind
    assert {
        "dbjobs_jobs_finished_total",
        "dbjobs_queue_lag_seconds",
        "dbjobs_job_duration_seconds_bucket",
    } <= exposed
    missing = {
        where: sorted(set(SERIES.findall(expression)) - exposed)
        for where, found in expressions().items()
        for expression in found
        if set(SERIES.findall(expression)) - exposed
    }
    assert missing == {}, f"names the package does not expose: {missing}"


def test_the_dashboard_is_a_grafana_dashboard_of_panels_with_queries():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "django-dbjobs" and dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    for panel in dashboard["panels"]:
        assert panel["targets"] and all(target["expr"].strip() for target in panel["targets"]), panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    assert {"datasource", "queue"} <= {variable["name"] for variable in dashboard["templating"]["list"]}
    assert len(expressions()) == len(dashboard["panels"]) + 7  # seven alert rules read


def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get(OPT_IN) == "1":
            pytest.fail(f"{OPT_IN}=1 and no promtool: apt-get install -y prometheus")
        pytest.skip(f"promtool (Debian's prometheus) is not installed; {OPT_IN}=1 requires it")
    checked = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
