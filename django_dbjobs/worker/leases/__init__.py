"""Leases and recovery: the heartbeat, whether a worker still owns what it holds, the
orphan sweep of dead workers' jobs, and reconciling what the database says a worker owns."""
