"""Execute a generated notebook with nbclient, as a user would after a few edits in Colab.

Usage: python run_notebook.py NOTEBOOK [KEY=VALUE ...]. Sets the config.yaml cell's keys (and
master_port as torchrun's PET_MASTER_PORT too), runs the training cell on the XLA CPU device instead of a TPU,
executes every cell in the notebook's folder (stopping at the first that fails) and writes the
executed notebook next to it as executed.ipynb. With ``interrupt_at_iteration=N``, the training cell is
interrupted as the stop button interrupts it, once training.log shows iteration N: the notebook then
ends there (a KeyboardInterrupt), and that is not a failure. Run it with the Python whose environment the kernel
should have (the kernel is that interpreter).
"""

import os
import sys
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

# Interrupts the kernel's main thread, as Jupyter's stop button does, once a run has logged iteration N.
INTERRUPT = """\
import _thread, pathlib, re, threading, time

def _trained(iteration):
    logs = [log.read_text() for log in pathlib.Path().glob("**/training.log")]
    return any(int(i) >= iteration for log in logs for i in re.findall(r"iteration (\\d+):", log))

def _interrupt_at(iteration):
    while not _trained(iteration):
        time.sleep(0.2)
    _thread.interrupt_main()

threading.Thread(target=_interrupt_at, args=({iteration},), daemon=True).start()
"""


def main(path: Path, overrides: dict) -> None:
    notebook = nbformat.read(path, as_version=4)
    interrupt_at = overrides.pop("interrupt_at_iteration", None)
    for cell in notebook.cells:
        if cell.source.startswith("%%writefile config.yaml\n"):
            head, body = cell.source.split("\n", 1)
            config = yaml.safe_load(body)
            config.update({key: value for key, value in overrides.items() if key in config or key != "master_port"})
            cell.source = head + "\n" + yaml.safe_dump(config, sort_keys=False)
        if "\nCOMMAND = " in cell.source:  # the training cell
            cell.source = cell.source.replace("PJRT_DEVICE=TPU", "PJRT_DEVICE=CPU")
            if interrupt_at is not None:
                cell.source = INTERRUPT.format(iteration=interrupt_at) + cell.source
    if "master_port" in overrides:  # torchrun's too, which its --master_port takes from PET_MASTER_PORT
        os.environ["PET_MASTER_PORT"] = str(overrides["master_port"])
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except CellExecutionError as error:
        if interrupt_at is None or error.ename != "KeyboardInterrupt":
            raise
    nbformat.write(notebook, path.parent / "executed.ipynb")


if __name__ == "__main__":
    main(Path(sys.argv[1]), {k: yaml.safe_load(v) for k, v in (arg.split("=", 1) for arg in sys.argv[2:])})
