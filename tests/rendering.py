"""Files of a generated project, rendered as cookiecutter renders them, without writing the project (nor running
its hooks): a grid of answer sets is then seconds. ``tests/test_readme.py::test_rendered_readme_is_the_baked_one``
checks that this rendering is cookiecutter's."""

import functools

from answers import REPO
from cookiecutter.generate import create_env_with_context, generate_context
from cookiecutter.prompt import prompt_for_config
from jinja2 import FileSystemLoader


def render(template: str, answers: dict, *paths: str) -> list[str]:
    """Files of the project cookiecutter would generate from these answers, rendered but not written."""
    return list(_render(template, tuple(answers.items()), paths))


@functools.cache
def _render(template: str, answers: tuple, paths: tuple[str, ...]) -> tuple[str, ...]:
    answers = dict(answers)
    context = generate_context(context_file=str(REPO / template / "cookiecutter.json"), extra_context=answers)
    context["cookiecutter"] = prompt_for_config(context, no_input=True)
    env = create_env_with_context(context)
    # What cookiecutter's generate_files searches: the project template, then the shared partials.
    env.loader = FileSystemLoader(
        [str(REPO / template / "{{cookiecutter.__project_dir}}"), str(REPO / template / "templates")]
    )
    return tuple(env.get_template(path).render(**context) for path in paths)
