"""Operating a queue: status, queue statistics, retention, known and unknown names, imports."""
