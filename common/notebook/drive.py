{#- Runs kept on Google Drive survive a disconnect (the runtime's disk does not): "Run all" then continues. -#}
# A disconnected Colab runtime loses its disk, run directories included. On Google Drive they stay, and
# "Run all" after a disconnect continues the interrupted run. Skipped outside Colab (and when False).
import sys
from pathlib import Path

import yaml

KEEP_RUNS_ON_DRIVE = True

output_dir = Path(yaml.safe_load(Path("config.yaml").read_text())["output_dir"])
if KEEP_RUNS_ON_DRIVE and "google.colab" in sys.modules:
    from google.colab import drive

    drive.mount("/content/drive")
    on_drive = Path("/content/drive/MyDrive") / "{{ cookiecutter.project_slug }}" / output_dir.name
    on_drive.mkdir(parents=True, exist_ok=True)
    if output_dir.is_symlink():
        output_dir.unlink()
    if output_dir.exists():
        raise SystemExit(f"{output_dir} holds runs on this runtime: move them to {on_drive}, then run this again.")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    output_dir.symlink_to(on_drive, target_is_directory=True)
    print(f"Runs go to {on_drive} on Google Drive (through {output_dir}).")
else:
    print(f"Runs go to {output_dir.resolve()} on this machine.")
