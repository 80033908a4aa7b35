"""The schedule form: a choice of registered jobs; an unknown one refused while a job module is broken."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _

from ..models import Schedule
from .known_jobs import import_error_messages, known_jobs


def job_choices(current: str | None) -> list[tuple[str, str]]:
    """The registered jobs by name; the schedule's own job too, marked, if this process does not know it."""
    names = sorted(known_jobs())
    choices = [("", "---------"), *((name, name) for name in names)]
    if current and current not in names:
        choices.append((current, _("%(name)s (not registered in this process)") % {"name": current}))
    return choices


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "job" in self.fields:
            # A Select over a CharField: a name posted from elsewhere still gets the model's message.
            self.fields["job"].widget = forms.Select(choices=job_choices(self.instance.job))

    def _post_clean(self):
        errors = import_error_messages()
        job = self.cleaned_data.get("job", self.instance.job)
        if errors and job not in known_jobs():
            # Schedule.clean() looks for a job it does not know by importing every job module: it
            # would raise. A known job (an enabled flag toggled, say) is checked as always.
            for error in errors:
                text = _("%(error)s A job this process does not know cannot be checked until it imports.")
                self.add_error(None, text % {"error": error})
            return
        super()._post_clean()
