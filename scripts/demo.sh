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
# What else a template needs to learn visibly in a minute on a CPU. Segmentation: smaller scenes than VOC's
# crops, LR-ASPP (MobileNetV3; DeepLabV3-ResNet-50 takes 20 s an iteration), more and smaller batches, and a
# learning rate above VOC's (at its 0.02, mIoU 0.06 after these 3 epochs; a constant prediction scores 0.037).
# Text: shorter reviews (the tiny model finds their 3 sentiment words among fewer fillers). The GAN: more steps,
# larger ones.
segmentation = dict(crop_size=64, model="lraspp_mobilenet_v3_large", batch_size=4, lr=0.05)
quick |= {
    "vision-segmentation": dict(segmentation, max_epochs=3, train_epoch_length=48),
    "text-classification": dict(max_length=64),
    "gan": dict(train_epoch_length=50, lr=2e-3),  # its learning test's: at 2e-4, 40 iterations draw grey noise
}.get(sys.argv[1], {})
config.update({key: value for key, value in quick.items() if key in config})
yaml.safe_dump(config, open("config.yaml", "w"), sort_keys=False)
PY
"$venv/bin/python" main.py config.yaml
run_dir="$(ls -d "$project"/logs/* | tail -n 1)"
echo
echo "Demo project: $project"
echo "Run directory: $run_dir"
# What it reached: the last evaluation (the GAN has none: its losses, and the sample grids in samples/).
reached="$(grep -h " - eval: " "$run_dir/training.log" | tail -n 1 | sed 's/.* - eval: //' || true)"
echo "Reached: ${reached:-see $run_dir/samples/ for the generated images}"
