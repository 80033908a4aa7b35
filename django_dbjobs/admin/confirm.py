"""Confirmation pages: a GET shows what would change, only a POST with a CSRF token changes it."""

from __future__ import annotations

from django.contrib.admin import helpers
from django.template.response import TemplateResponse


def selected_count(request) -> int:
    """How many rows were ticked on the page; 0 with "select all" (the whole filter)."""
    if request.POST.get("select_across") == "1":
        return 0
    return len(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))


#: Rows listed on a confirmation page; the rest are counted.
SHOWN = 20


def confirm_action(
    modeladmin,
    request,
    queryset,
    *,
    title: str,
    question: str,
    button: str,
    count: str,
    cancel_url: str | None = None,
    destructive: bool = True,
):
    """The page Django's own delete action shows: what would change, and a POST form to confirm.

    The form posts to the same address, with ``post=yes`` and, from an action, the action and
    the selection again. `cancel_url` defaults to the list, with its filters, as the action came
    from it.
    """
    return confirm_page(
        modeladmin,
        request,
        title=title,
        question=question,
        button=button,
        count=count,
        shown=list(queryset[: SHOWN + 1]),
        form_url="",
        cancel_url=request.get_full_path() if cancel_url is None else cancel_url,
        destructive=destructive,
        action=request.POST.get("action"),
        select_across=request.POST.get("select_across") == "1",
        selected=request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        action_checkbox_name=helpers.ACTION_CHECKBOX_NAME,
    )


def confirm_page(
    modeladmin,
    request,
    *,
    title,
    question,
    button,
    count,
    shown,
    form_url,
    cancel_url,
    destructive: bool = True,
    **extra,
):
    """A confirmation page whose form posts to `form_url`; `shown` lists up to SHOWN rows (one more: "…").

    Only a `destructive` change (a delete) gets Django's red button; others the normal one.
    """
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "changelist_crumb": True,
        "question": question,
        "button": button,
        "count": count,
        "shown": shown[:SHOWN],
        "more": len(shown) > SHOWN,
        "opts": modeladmin.model._meta,
        "form_url": form_url,
        "cancel_url": cancel_url,
        "destructive": destructive,
        **extra,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(request, "admin/django_dbjobs/confirm.html", context)
