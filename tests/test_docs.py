"""The reference docs agree with the code: every setting's default, every command option."""

import ast
import re
from pathlib import Path

import pytest
from django.core.management import load_command_class

from django_dbjobs.conf import DEFAULTS

DOCS = Path(__file__).resolve().parent.parent / "docs"
COMMANDS = Path(__file__).resolve().parent.parent / "django_dbjobs" / "management" / "commands"
#: Options every Django command has; documented by Django.
DJANGO_OPTIONS = {
    "--help",
    "--version",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
}


def documented_settings() -> dict[str, str]:
    """DBJOBS_<NAME> -> the text of its Default cell, from docs/reference/settings.rst."""
    text = (DOCS / "reference" / "settings.rst").read_text()
    rows = re.findall(r"^   \* - ``DBJOBS_(\w+)``\n     - (.+)$", text, flags=re.M)
    return dict(rows)


def test_every_setting_is_documented_with_its_real_default():
    documented = documented_settings()
    assert sorted(documented) == sorted(DEFAULTS), "settings.rst and conf.DEFAULTS name different settings"
    for name, cell in documented.items():
        literal = re.match(r"``(.+?)``", cell)
        assert literal, f"DBJOBS_{name}: the Default cell should start with a ``literal``: {cell!r}"
        value = literal[1].replace("true", "True").replace("false", "False")
        assert ast.literal_eval(value) == DEFAULTS[name], (
            f"DBJOBS_{name}: docs say {value}, code says {DEFAULTS[name]!r}"
        )


def command_names() -> list[str]:
    return sorted(p.stem for p in COMMANDS.glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("command", command_names())
def test_every_command_and_option_is_documented(command):
    text = (DOCS / "reference" / "commands.rst").read_text()
    sections = re.split(r"^(\w+)\n-+\n", text, flags=re.M)
    by_command = dict(zip(sections[1::2], sections[2::2], strict=True))
    assert command in by_command, f"docs/reference/commands.rst has no section for {command}"
    parser = load_command_class("django_dbjobs", command).create_parser("manage.py", command)
    options = {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option not in DJANGO_OPTIONS
    }
    missing = [option for option in sorted(options) if f"``{option}" not in by_command[command]]
    assert not missing, f"{command}: options not documented in docs/reference/commands.rst: {missing}"


def test_the_installation_page_names_the_latest_migration():
    migrations = DOCS.parent / "django_dbjobs" / "migrations"
    latest = max(p.stem for p in migrations.glob("0*.py"))
    text = (DOCS / "installation.rst").read_text()
    assert f"``{latest}``" in text, f"docs/installation.rst should say the migrations end at {latest}"


def test_every_tasks_setting_shown_lists_its_queues():
    """Pasted without QUEUES, TASKS allows only "default": the examples' queue_name="emails" would raise."""
    for page in [DOCS.parent / "README.rst", *DOCS.rglob("*.rst")]:
        for snippet in re.findall(r"TASKS = \{.*?(?:\n\s*\n|\Z)", page.read_text(), flags=re.S):
            if "DatabaseBackend" in snippet:
                assert '"QUEUES"' in snippet, f"{page.name}: {snippet[:80]!r}"
