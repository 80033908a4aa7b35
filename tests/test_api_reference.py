"""The API reference page (docs/reference/api.rst) documents every public name, from its docstring."""

import re
from pathlib import Path

import pytest

import django_dbjobs
from django_dbjobs import testing

API_PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "api.rst"
DOCUMENTED = re.compile(r"^\.\. auto(?:function|class|decorator|exception):: ([\w.]+)", re.MULTILINE)


def documented_names() -> set[str]:
    return set(DOCUMENTED.findall(API_PAGE.read_text()))


@pytest.mark.parametrize("name", django_dbjobs.__all__)
def test_every_public_name_has_a_docstring(name):
    assert (getattr(django_dbjobs, name).__doc__ or "").strip(), f"django_dbjobs.{name} has no docstring"


@pytest.mark.parametrize("name", django_dbjobs.__all__)
def test_every_public_name_is_on_the_api_page(name):
    assert f"django_dbjobs.{name}" in documented_names()


@pytest.mark.parametrize("name", testing.__all__)
def test_the_testing_helpers_are_on_the_api_page(name):
    assert (getattr(testing, name).__doc__ or "").strip(), f"testing.{name} has no docstring"
    assert f"django_dbjobs.testing.{name}" in documented_names()


def test_the_api_page_documents_only_names_that_exist():
    for dotted in documented_names():
        module, _, name = dotted.rpartition(".")
        assert hasattr(__import__(module, fromlist=[name]), name), dotted


def test_the_package_says_it_is_typed():
    assert (Path(django_dbjobs.__file__).parent / "py.typed").is_file()
