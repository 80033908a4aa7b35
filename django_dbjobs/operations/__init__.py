"""Operating a queue: status and queue statistics, retention, known and unknown names, the django-tasks-db import."""
