"""Post-generation hook shared by every template: drop files for options that were not chosen.

Runs in the generated project's directory with cookiecutter's Python (standard library only). Its
output must be deterministic: cruft re-runs it to compute update diffs.
"""

import json
import shutil
from pathlib import Path


def remove_unchosen(ctx: dict, root: Path) -> None:
    """Delete files that belong to options the user turned off."""
    if not ctx["include_test"]:
        shutil.rmtree(root / "tests")
    if ctx["backend"] != "xla-tpu":
        (root / "xla_compat.py").unlink()
        if ctx["include_test"]:
            (root / "tests" / "test_xla.py").unlink()


def main(ctx: dict, root: Path) -> None:
    remove_unchosen(ctx, root)


if __name__ == "__main__":
    main(json.loads(r"""{{ cookiecutter | tojson }}"""), Path.cwd())
