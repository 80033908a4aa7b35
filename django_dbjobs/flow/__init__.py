"""Flow control: concurrency limits per key, rate limits per queue, cancelling running jobs.

The claim asks these (it picks only admitted jobs, and takes a rate slot per start); the
worker gives slots back by finishing jobs and admits the next ones (admission.py).
"""
