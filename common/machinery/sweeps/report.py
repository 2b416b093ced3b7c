"""What a finished sweep leaves to read, in its study's directory: the best trial's config, ready to train, a table of
the trials (``trials.csv``, printed too) and two pictures (the optimisation history, the values' importances)."""

import csv
import io
import os
import warnings
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import optuna
from optuna.trial import TrialState

from machinery.config_files import with_values
from machinery.runs.files import write_whole

BEST_CONFIG = "best-config.yaml"  # the best trial's config, its output_dir the project's


def write_report(study: optuna.Study, study_dir: Path, text: str, output_dir: str, command: str) -> None:
    """Write the study's best config, its table and pictures into ``study_dir``; print the table and what to run."""
    trials = [trial for trial in study.get_trials(deepcopy=False) if not trial.user_attrs.get("surplus")]
    keys = list(study.user_attrs["space"])
    rows = [["trial", "run", "state", "score", *keys]]
    continued = {t.user_attrs.get("run"): t.number for t in trials if t.state != TrialState.FAIL}
    for trial in trials:
        score = "" if trial.value is None else f"{trial.value:.6g}"
        state = trial.state.name.lower()
        if trial.state == TrialState.FAIL and trial.user_attrs.get("run") in continued:  # a stop, not a failure
            state = f"stopped, continued by {continued[trial.user_attrs['run']]}"
        elif "failed" in trial.user_attrs:
            state = f"failed: {trial.user_attrs['failed']}"
        rows.append([str(trial.number), trial.user_attrs.get("run", ""), state, score])
        rows[-1] += [str(trial.params.get(key, "")) for key in keys]
    table = io.StringIO()
    csv.writer(table, lineterminator="\n").writerows(rows)
    write_whole(study_dir / "trials.csv", table.getvalue())
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())

    best = study.best_trial
    header = f"# The best trial of the sweep {study.study_name}: trial {best.number}, score {best.value:.6g}.\n"
    write_whole(study_dir / BEST_CONFIG, header + with_values(text, {**best.params, "output_dir": output_dir}))
    path = study_dir / BEST_CONFIG
    shown = command.format(config=path, dir=path.parent.resolve(), name=path.stem)
    print(f"Best: trial {best.number} (score {best.value:.6g}), its config {path}.\nTrain it: {shown}")
    _pictures(study, study_dir, sum(trial.state == TrialState.COMPLETE for trial in trials))


def _pictures(study: optuna.Study, study_dir: Path, completed: int) -> None:
    """history.png (each trial's score, and the best so far) and, from two completed trials, importances.png (how much
    each key of the space moved the score)."""
    matplotlib.use("Agg")  # files, no window
    score = study.user_attrs.get("score", "score")
    titles = {
        "history.png": f"Sweep {study.study_name}: {score} of each trial",
        "importances.png": f"What moved {score}",
    }
    with warnings.catch_warnings():
        # Optuna's plots are experimental, and warn when the importances cannot tell the values apart (few trials).
        warnings.simplefilter("ignore")
        plots = {"history.png": optuna.visualization.matplotlib.plot_optimization_history}
        if completed >= 2:
            plots["importances.png"] = optuna.visualization.matplotlib.plot_param_importances
        for name, plot in plots.items():
            axes = plot(study, target_name=score)
            axes.set_title(titles[name])
            if name == "history.png":
                axes.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))  # trial numbers
            axes.figure.set_size_inches(8, 5)
            axes.figure.tight_layout()
            partial = study_dir / f".{name}.{os.getpid()}.png"  # workers ending together each write the report
            axes.figure.savefig(partial, dpi=100)
            os.replace(partial, study_dir / name)
            plt.close(axes.figure)
