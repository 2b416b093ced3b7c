"""Pre-generation hook shared by every template: reject invalid answers before a file is written.

Cookiecutter renders this file with Jinja and runs it with its own Python, so it may only use the
standard library. The answers arrive as JSON on the last line; everything above it is plain Python
that the tests import and call directly.
"""

import json
import keyword
import re
import sys

# The longest slug: a derived one is cut at a word boundary to 48 characters (cookiecutter.json),
# "project_" or "_project" may be added to it.
MAX_SLUG_LENGTH = 64
GITHUB_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]*/[A-Za-z0-9._\-]+")


def slug_errors(slug: str, reserved: list[str]) -> list[str]:
    """The slug names the project's directory and package: a plain, importable, portable name.

    Underscores only between words: the directory name is the slug passed through slugify (so it
    can never hold a path separator), and that must leave a valid slug unchanged. ``reserved`` is
    the template's ``_reserved_slugs``: its modules, the packages it must not shadow and Python's
    keywords. The slug derived from the project name steers clear of all of these, so only a slug
    typed by the user can be refused here.
    """
    rule = (
        "it must be a Python package name: lower-case letters and digits, words joined by single "
        "underscores, starting with a letter"
    )
    if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", slug):
        hint = f"; for example 'project_{slug}'" if re.fullmatch(r"[0-9][a-z0-9_]*", slug) else ""
        return [f"project_slug={slug!r} is not allowed: {rule}{hint}"]
    if len(slug) > MAX_SLUG_LENGTH:
        # It names the directory and <slug>.ipynb: file systems refuse names over 255 bytes.
        return [
            f"project_slug={slug!r} is not allowed: it must be at most {MAX_SLUG_LENGTH} characters long "
            f"(it has {len(slug)}); for example {slug[:MAX_SLUG_LENGTH].rstrip('_')!r}"
        ]
    if keyword.iskeyword(slug) or slug in reserved:
        names = sorted(name for name in reserved if not keyword.iskeyword(name))
        return [
            f"project_slug={slug!r} is not allowed: it must not be a Python keyword or one of "
            f"{names} (the project's own modules and the packages it imports); for example '{slug}_project'"
        ]
    return []


def validate(ctx: dict) -> list[str]:
    """Return one plain-English message per invalid answer (empty when all answers are valid). The questions are
    structural; what a run does is config.yaml's, checked when it runs (machinery/settings.py)."""
    errors = []
    name = str(ctx["project_name"])
    if not name.strip() or not name.isprintable():
        errors.append(f"project_name={name!r} is not allowed: it must be non-empty printable text")
    errors += slug_errors(str(ctx["project_slug"]), ctx["_reserved_slugs"])
    if ctx["github_repo"] and not GITHUB_PATTERN.fullmatch(str(ctx["github_repo"])):
        errors.append(
            f"github_repo={ctx['github_repo']!r} is not allowed: it must be empty or owner/name "
            f"(letters, digits, '.', '_' or '-')"
        )
    if not errors:
        errors += launch_rules(ctx)
    return errors


def launch_rules(ctx: dict) -> list[str]:
    """Rules that tie the launcher and the scheduler to the backend (answers already well-formed)."""
    launcher = ctx["__launcher"]  # "auto" resolved: spawn for xla-tpu, torchrun for slurm, else none
    if ctx["scheduler"] == "slurm" and ctx["backend"] == "xla-tpu":
        return [
            "scheduler='slurm' is not allowed with backend='xla-tpu': it must be 'none' (the Slurm job script "
            "starts nccl or gloo processes with torchrun; a TPU VM or Kaggle runs the 8 replicas)"
        ]
    if ctx["scheduler"] == "slurm" and launcher != "torchrun":
        return [
            f"launcher={ctx['launcher']!r} is not allowed with scheduler='slurm': it must be 'torchrun' or 'auto' "
            f"(the job script starts torchrun on each node through srun)"
        ]
    if ctx["backend"] == "xla-tpu" and launcher != "spawn":
        # An 8-chip TPU host (Kaggle's v5e-8, a v4-8 or v5e-8 TPU VM) runs 8 replicas, started by torch_xla's spawn.
        return [
            f"launcher={ctx['launcher']!r} is not allowed with backend='xla-tpu': it must be 'spawn' or 'auto' "
            "(TPU training runs 8 replicas, started by spawn, on one node)"
        ]
    return []


def main(ctx: dict) -> None:
    """Print every problem at once, then stop generation with a non-zero exit."""
    errors = validate(ctx)
    if errors:
        template = ctx.get("_template_name", "template")
        print(f"Cannot generate the {template} project:", file=sys.stderr)
        for message in errors:
            print(f"  - {message}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main(json.loads(r"""{{ cookiecutter | tojson }}"""))
