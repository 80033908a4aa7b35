import pytest

from django_dbjobs.worker.running.retry import RetryPolicy


@pytest.mark.parametrize(
    "attempt, expected",
    [(1, 2.0), (2, 4.0), (3, 8.0), (6, 64.0), (7, 100.0), (500, 100.0)],
)
def test_delay_doubles_per_attempt_up_to_the_cap(attempt, expected):
    assert RetryPolicy(base=2, cap=100, jitter=False).delay(attempt) == expected


@pytest.mark.parametrize("rand, factor", [(0.0, 0.5), (0.5, 0.75), (1.0, 1.0)])
def test_jitter_draws_from_the_upper_half(rand, factor):
    assert RetryPolicy(base=4, cap=100).delay(2, rand=lambda: rand) == 8 * factor


def test_policy_for_job_uses_settings_unless_the_job_sets_backoff(settings):
    settings.DBJOBS_RETRY_BACKOFF = 3
    settings.DBJOBS_RETRY_BACKOFF_MAX = 50
    assert RetryPolicy.for_job(None) == RetryPolicy(base=3.0, cap=50.0)
    assert RetryPolicy.for_job(0.5) == RetryPolicy(base=0.5, cap=50.0)
