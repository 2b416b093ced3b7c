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
HOST_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:]+\]")
PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_\-]+")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"}
GITHUB_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]*/[A-Za-z0-9._\-]+")


def _int_rule(ctx: dict, key: str, minimum: int, maximum: int | None = None) -> str | None:
    """Check that ``ctx[key]`` is a whole number in range; return an error message or None."""
    value = str(ctx[key]).strip()
    allowed = f"a whole number from {minimum} to {maximum}" if maximum else f"a whole number of at least {minimum}"
    if not re.fullmatch(r"-?[0-9]+", value) or not (minimum <= int(value) <= (maximum or int(value))):
        return f"{key}={ctx[key]!r} is not allowed: it must be {allowed}"
    return None


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
    """Return one plain-English message per invalid answer (empty when all answers are valid)."""
    errors = []
    name = str(ctx["project_name"])
    if not name.strip() or not name.isprintable():
        errors.append(f"project_name={name!r} is not allowed: it must be non-empty printable text")
    errors += slug_errors(str(ctx["project_slug"]), ctx["_reserved_slugs"])

    checks = [
        ("nproc_per_node", 1, None),
        ("nnodes", 1, None),
        ("master_port", 1, 65535),
        ("n_saved", 1, None),
        ("save_every_iters", 1, None),
        ("patience", 0, None),
        ("limit_sec", 0, None),
        ("log_every_iters", 1, None),
    ]
    # A template asks only the questions that apply to it (a GAN has no patience): check those it asks.
    errors += [msg for key, low, high in checks if key in ctx and (msg := _int_rule(ctx, key, low, high))]

    if not HOST_PATTERN.fullmatch(str(ctx["master_addr"])):
        errors.append(f"master_addr={ctx['master_addr']!r} is not allowed: it must be a host name or an IP address")
    if not PREFIX_PATTERN.fullmatch(str(ctx["filename_prefix"])):
        errors.append(
            f"filename_prefix={ctx['filename_prefix']!r} is not allowed: it must use only letters, digits, '_' or '-'"
        )
    output_dir = str(ctx["output_dir"])
    if not output_dir.strip() or not output_dir.isprintable():
        errors.append(f"output_dir={output_dir!r} is not allowed: it must be a non-empty path on one line")

    if ctx["github_repo"] and not GITHUB_PATTERN.fullmatch(str(ctx["github_repo"])):
        errors.append(
            f"github_repo={ctx['github_repo']!r} is not allowed: it must be empty or owner/name "
            f"(letters, digits, '.', '_' or '-')"
        )

    errors += precision_errors(ctx)
    if ctx.get("compile") is True and ctx.get("backend") == "xla-tpu":
        errors.append(
            "compile=True is not allowed with backend='xla-tpu': it must be False (torch_xla compiles each training "
            "step's graph itself; torch.compile's inductor is for GPUs and CPUs)"
        )
    if not errors:
        errors += distributed_rules(ctx)
    return errors


PRECISIONS = ("no", "float16", "bfloat16")


def precision_errors(ctx: dict) -> list[str]:
    """``mixed_precision`` is one of PRECISIONS (a choice: cookiecutter refuses another value before this hook, but
    a replay file reaches it as written, an older project's yes/no included), and not float16 on TPU."""
    value = ctx.get("mixed_precision", "no")
    if value not in PRECISIONS:
        hint = ""
        if isinstance(value, bool):  # an answer to the yes/no question this one replaced
            on = "'bfloat16'" if ctx.get("backend") == "xla-tpu" else "'float16' or 'bfloat16'"
            hint = f" (the question was yes/no: for true give {on}, for false 'no')"
        return [f"mixed_precision={value!r} is not allowed: it must be one of {list(PRECISIONS)}{hint}"]
    if value == "float16" and ctx.get("backend") == "xla-tpu":
        return [
            "mixed_precision='float16' is not allowed with backend='xla-tpu': it must be 'bfloat16' or 'no' "
            "(TPUs compute in bfloat16, which needs no gradient scaler; float16's scaler is for CUDA GPUs)"
        ]
    return []


def distributed_rules(ctx: dict) -> list[str]:
    """Rules that tie the launcher and process counts to the backend (answers already well-formed)."""
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
    if ctx["backend"] == "xla-tpu":
        # An 8-chip TPU host (Kaggle's v5e-8, a v4-8 or v5e-8 TPU VM) runs 8 replicas, started by torch_xla's spawn.
        given = {"launcher": launcher, "nproc_per_node": int(ctx["nproc_per_node"]), "nnodes": int(ctx["nnodes"])}
        required = {"launcher": "spawn", "nproc_per_node": 8, "nnodes": 1}
        # A multi-host slice (v5e-16 and larger) needs what one TPU VM does not: the README's "TPU pods".
        pods = {"nnodes": "; a slice of several hosts is not supported yet: see 'TPU pods' in Ignite Templates' README"}
        return [
            f"{key}={ctx[key]!r} is not allowed with backend='xla-tpu': it must be {required[key]!r} "
            f"(TPU training runs 8 replicas, started by spawn, on one node{pods.get(key, '')})"
            for key in required
            if given[key] != required[key]
        ]
    if int(ctx["nnodes"]) > 1 and ctx["master_addr"] in LOOPBACK:
        return [
            f"master_addr={ctx['master_addr']!r} is not allowed with nnodes={ctx['nnodes']!r}: it must be the "
            f"address of the master node that the other nodes can reach, not a loopback address"
        ]
    if launcher == "none":
        return [
            f"{key}={ctx[key]!r} is not allowed with launcher='none' (one process): it must be 1; "
            f"choose launcher 'torchrun' or 'spawn' for distributed training"
            for key in ("nproc_per_node", "nnodes")
            if int(ctx[key]) != 1
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
