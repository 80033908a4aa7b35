"""Links between the admin pages, on whichever admin site shows them."""

from __future__ import annotations

from django.urls import reverse


def admin_url(modeladmin, name: str, *args, model: str | None = None) -> str:
    """The URL named ``<app>_<model>_<name>`` on `modeladmin`'s admin site."""
    opts = modeladmin.opts
    return reverse(
        f"admin:{opts.app_label}_{model or opts.model_name}_{name}",
        args=args,
        current_app=modeladmin.admin_site.name,
    )
