{% from "commands.j2" import train_command with context %}
{#- The README's training command (the same macro), in a process group of its own so that the stop
    button reaches all of it. One line when `COMMAND = "..."` fits in the project's 120 characters; a longer
    one in two, the launcher's arguments then the script's, as ruff formats a string split in two. -#}
{% set command = train_command() %}
{% set launcher, _, script = command.partition(" main.py ") %}
# The README's training command. Interrupt (the stop button) stops it cleanly: every process finishes its
# iteration and a training checkpoint is saved; run this cell again (or "Run all") to continue the run.
import codecs
import os
import signal
import subprocess
import sys

{% if command | length <= 108 %}
COMMAND = {{ command | tojson }}
{% else %}
COMMAND = (
    {{ (launcher ~ " ") | tojson }}
    {{ ("main.py " ~ script) | tojson }}
)
{% endif %}
# `python` and `torchrun` are this notebook's, as for the install cell.
env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
# Incremental: a chunk may end inside a character (the progress bar's blocks take 3 bytes).
decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")


def show_output(run: subprocess.Popen) -> None:
    for chunk in iter(lambda: run.stdout.read1(), b""):
        print(decoder.decode(chunk), end="", flush=True)


with subprocess.Popen(COMMAND, shell=True, env=env, start_new_session=True, **output) as run:
    try:
        show_output(run)
    except KeyboardInterrupt:
        os.killpg(run.pid, signal.SIGINT)  # a Ctrl-C to the whole command
        show_output(run)  # until it has stopped cleanly
        raise
if run.returncode != 0:
    raise RuntimeError(f"training failed (exit status {run.returncode}): see its output above")
