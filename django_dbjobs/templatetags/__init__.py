"""Template tags and filters for the admin pages."""
