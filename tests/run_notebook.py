"""Execute a generated notebook with nbclient, as a user would after a few edits in Colab.

Usage: python run_notebook.py NOTEBOOK [KEY=VALUE ...]. Sets the config.yaml cell's keys (and
master_port in a torchrun command too), runs the training cell on the XLA CPU device instead of a TPU,
executes every cell in the notebook's folder (stopping at the first that fails) and writes the
executed notebook next to it as executed.ipynb. Run it with the Python whose environment the kernel
should have (the kernel is that interpreter).
"""

import re
import sys
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient


def main(path: Path, overrides: dict) -> None:
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.source.startswith("%%writefile config.yaml\n"):
            head, body = cell.source.split("\n", 1)
            config = yaml.safe_load(body)
            config.update({key: value for key, value in overrides.items() if key in config or key != "master_port"})
            cell.source = head + "\n" + yaml.safe_dump(config, sort_keys=False)
        if cell.source.startswith("%%bash\n"):
            cell.source = cell.source.replace("PJRT_DEVICE=TPU", "PJRT_DEVICE=CPU")
            if "master_port" in overrides:  # torchrun's port, on its command line
                cell.source = re.sub(r"--master_port=\d+", f"--master_port={overrides['master_port']}", cell.source)
    NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    nbformat.write(notebook, path.parent / "executed.ipynb")


if __name__ == "__main__":
    main(Path(sys.argv[1]), {k: yaml.safe_load(v) for k, v in (arg.split("=", 1) for arg in sys.argv[2:])})
