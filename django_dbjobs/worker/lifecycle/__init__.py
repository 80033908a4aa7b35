"""The worker's life: starting, the loop and its idle wait, the parts it drives, signals,
shutdown, the supervisor of ``--processes`` and a worker's replacement."""
