#!/usr/bin/env bash
# The demo, from a fresh clone: generate a template's default project (vision-classification, or the
# template named as the first argument, e.g. `bash scripts/demo.sh gan`) into demo/ and train it
# briefly, offline, on synthetic data (about a minute on 2 CPU cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
template="${1:-vision-classification}"
venv="$(bash "$root/scripts/env.sh" base)" # the demo runs in the base venv only
rm -rf "$root/demo"
"$venv/bin/cookiecutter" "$root" --directory "$template" --no-input --output-dir "$root/demo"
project="$(find "$root/demo" -mindepth 1 -maxdepth 1 -type d)"
cd "$project"
# What a user edits in config.yaml for a quick offline run (each template has its own keys).
"$venv/bin/python" - "$template" <<'PY'
import sys

import yaml

config = yaml.safe_load(open("config.yaml"))
quick = dict(dataset="synthetic", max_epochs=2, train_epoch_length=20, eval_epoch_length=4, num_workers=0)
if sys.argv[1] == "vision-segmentation":  # smaller scenes than VOC's crops, and LR-ASPP (MobileNetV3):
    quick.update(crop_size=64, model="lraspp_mobilenet_v3_large")  # DeepLabV3-ResNet-50 takes 20 s an iteration
config.update({key: value for key, value in quick.items() if key in config})
yaml.safe_dump(config, open("config.yaml", "w"), sort_keys=False)
PY
"$venv/bin/python" main.py config.yaml
run_dir="$(ls -d "$project"/logs/* | tail -n 1)"
echo
echo "Demo project: $project"
echo "Run directory: $run_dir"
# What it reached: the last evaluation (the GAN has none: its losses, and the sample grids in samples/).
reached="$(grep -h " - eval: " "$run_dir/training.log" | tail -n 1 | sed 's/.* - eval: //')"
echo "Reached: ${reached:-see $run_dir/samples/ for the generated images}"
