"""The app's database migrations."""
