"""Django management commands, and the option types and helpers they share."""
