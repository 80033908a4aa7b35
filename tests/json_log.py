"""The JSON log formatter of docs/observability.rst ("Log fields"), for the worker subprocess tests."""

import json
import logging

FIELDS = ("job_id", "job_name", "job_queue", "job_attempt", "job_count", "schedule_name")


class JsonFormatter(logging.Formatter):
    def format(self, record):
        line = {"time": self.formatTime(record), "level": record.levelname, "message": record.getMessage()}
        line.update({key: getattr(record, key) for key in FIELDS if hasattr(record, key)})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
