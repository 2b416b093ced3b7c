"""What a user sees in a terminal: log records above a live progress bar that moves every iteration.

A generated project trains on CPU in a pseudo-terminal, as in a shell; the test reads back everything
written to the terminal, cursor returns included, and redraws each line the way the screen shows it.
"""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from answers import TEMPLATES
from projects import make_offline, read_log, readme_train_command, run_dirs

# The start of a console log record: the format setup_logging gives the "train" logger.
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} train (?:INFO|WARNING): ")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [\w.]+ (?:INFO|WARNING): ")


def run_in_terminal(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> str:
    """Run a command in a 120x40 pseudo-terminal; return all it printed, with the ``\\r`` that tqdm uses."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **env}
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([controller], [], [], 1)[0]:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # EIO: the process has exited and closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
        else:
            proc.kill()
    finally:
        os.close(controller)
    text = output.decode("utf-8", errors="replace").replace("\r\n", "\n")  # the terminal's own newline
    assert proc.wait(timeout=60) == 0, f"`{' '.join(argv)}` failed in {cwd}:\n{text[-6000:]}"
    return text


def screen_line(written: str) -> str:
    """A terminal line as shown: each ``\\r`` returns the cursor to column 0 and what follows overwrites."""
    cells: list[str] = []
    column = 0
    for char in written:
        if char == "\r":
            column = 0
            continue
        if column < len(cells):
            cells[column] = char
        else:
            cells.append(char)
        column += 1
    return "".join(cells).rstrip()


@pytest.mark.parametrize("template", TEMPLATES)
def test_log_records_print_above_a_progress_bar_that_moves_every_iteration(bake, template: str) -> None:
    project = bake(template)
    # 2 epochs of 3 iterations, the losses read every 2: reads while a bar is live, in each epoch.
    make_offline(project, max_epochs=2, train_epoch_length=3, log_every_iters=2)
    argv, env = readme_train_command(project)
    # tqdm draws every update (no 0.1 s throttle), so each position the bar takes shows in the output.
    written = run_in_terminal(argv, project, {**env, "TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1"})
    (run_dir,) = run_dirs(project)
    log = read_log(run_dir)
    assert log["iterations"] == [2, 4, 6], f"the losses are read every 2 iterations:\n{log['text']}"

    console_iterations = []
    for line in written.split("\n"):
        match = RECORD.search(line)
        if match:
            console_iterations += re.findall(r" - iteration (\d+): ", line)
            # The line on screen must be the record alone: no bar before it, no stale bar after it.
            assert screen_line(line) == line[match.start() :].rstrip(), (
                f"a log record was printed into the progress bar; the terminal shows:\n{screen_line(line)!r}\n"
                f"written: {line!r}"
            )
    assert [int(i) for i in console_iterations] == log["iterations"], f"the console lacks loss records:\n{written}"

    # The bar takes every position of each epoch, though the losses are read every 2nd iteration only.
    draws = [draw for line in written.split("\n") for draw in line.split("\r")]
    for epoch in (1, 2):
        shown = {int(n) for n in re.findall(rf"Epoch \[{epoch}/2\]: \[(\d)/3\]", "\n".join(draws))}
        assert shown == {1, 2, 3}, f"epoch {epoch}: the bar showed iterations {sorted(shown)} of 1, 2, 3"
    # At each read, the bar's postfix shows the values just read (tqdm rounds them to 3 significant digits).
    for iteration, values in zip(log["iterations"], log["train"], strict=True):
        epoch, position = (iteration - 1) // 3 + 1, (iteration - 1) % 3 + 1
        bars = [d for d in draws if f"Epoch [{epoch}/2]: [{position}/3]" in d]
        shown = [dict(re.findall(r"(\w+)=([-+.\deinaf]+)", bar.split("|")[-1])) for bar in bars]
        assert any(
            set(postfix) == set(values)
            and all(float(postfix[name]) == pytest.approx(value, rel=5e-3, abs=1e-4) for name, value in values.items())
            for postfix in shown
        ), f"iteration {iteration}: no bar shows the losses read there, {values}; the bar showed {bars}"

    # training.log keeps its form: one plain record per line, no bar and no cursor control.
    for line in log["text"].splitlines():
        assert LOG_LINE.match(line) or line.startswith("\t"), f"training.log has a line that is not a record: {line!r}"
    assert "\r" not in log["text"] and "%|" not in log["text"], "the progress bar leaked into training.log"
