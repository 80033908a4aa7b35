"""Running a claimed job: the job threads, one run and its outcome, retries, batched
successes, and interrupting a run (timeouts, cancels, lost jobs, jobs that will not stop)."""
