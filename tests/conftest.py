"""Fixtures: bake a template with pytest-cookies and check the result."""

from pathlib import Path

import pytest
from helpers import REPO


@pytest.fixture
def bake(cookies):
    """Bake ``template`` with the given answers; fail with cookiecutter's error if generation fails."""

    def _bake(template: str = "vision-classification", **answers) -> Path:
        result = cookies.bake(extra_context=answers, template=str(REPO / template))
        assert result.exception is None, f"baking {template} with {answers} failed: {result.exception!r}"
        assert result.exit_code == 0
        return Path(result.project_path)

    return _bake


@pytest.fixture
def bake_result(cookies):
    """Bake and return pytest-cookies' raw result, for tests that expect generation to fail."""

    def _bake(template: str = "vision-classification", **answers):
        return cookies.bake(extra_context=answers, template=str(REPO / template))

    return _bake
