project = "django-dbjobs"
author = "django-dbjobs developers"
release = "0.1.0.dev0"
extensions = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
