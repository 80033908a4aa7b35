"""The management commands, one module each (Django finds them here by their file names)."""
