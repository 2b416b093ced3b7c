"""What an experiment tracker recorded, read back from what it wrote.

Each reader returns ``{"name": run name, "config": {key: value}, "series": {"tag/name": [[step, value], ...]}}``,
with the series named as the tracker shows them (``train/train_loss``, ``eval/accuracy``, ``lr/group_0``, ...);
Neptune's, a list of them: one per offline run (``one_after_the_other`` joins them).
It reads with the tracker's own client where one reads local data (MLflow), from the live server (Visdom), and
from the tracker's documented files otherwise. The readers for MLflow and W&B need those packages: run them in the
trackers venv as ``python tracker_records.py TRACKER WHERE``, which prints the JSON. The others use only the
standard library and yaml (and tensorboard, which the base venv has).
"""

import html
import json
import re
import struct
import sys
import urllib.request
from pathlib import Path

import yaml


def one(paths: list) -> Path:
    """The single match of a glob: each test writes exactly one run."""
    assert len(paths) == 1, f"expected one run, found {paths}"
    return Path(paths[0])


def tensorboard(logdir: str) -> dict:
    """The one run under ``logdir``, found as ``tensorboard --logdir`` finds it (the folder of its event files,
    ``<run directory>/tensorboard``): its name is its first folder under ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = one(sorted({path.parent for path in Path(logdir).rglob("events.out.tfevents.*")}))
    events = EventAccumulator(str(run), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    series = {tag: [[e.step, e.value] for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    (text,) = events.Tensors("config/text_summary")
    markdown = text.tensor_proto.string_val[0].decode()
    config = yaml.safe_load(markdown.removeprefix("```yaml\n").removesuffix("```"))
    return {"name": run.relative_to(logdir).parts[0], "config": config, "series": series}


def mlflow(tracking_uri: str) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    # ignite's MLflow handlers join the parts of a name with spaces: "train train_loss", "optimizer lr group_0".
    series = {
        key.replace(" ", "/"): [[m.step, m.value] for m in client.get_metric_history(run.info.run_id, key)]
        for key in run.data.metrics
    }
    return {"name": run.info.run_name, "config": run.data.params, "series": series}


def _wandb_records(path: Path) -> list:
    """The records of an offline run's transaction log (``run-<id>.wandb``), in W&B's LevelDB-style log format.

    wandb 0.31 has no Python reader for it any more (its Go core writes and syncs it), so the format
    is read here: a 7-byte header, then 32 KiB blocks of chunks (crc32, length, type), each record a
    protobuf ``Record`` split over FULL or FIRST/MIDDLE.../LAST chunks.
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1), "not a W&B transaction log"
    records, block, pos, parts = [], 32768, 7, []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        parts.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind not in (1, 4):  # FIRST or MIDDLE: the record continues
            continue
        record = wandb_internal_pb2.Record()
        record.ParseFromString(b"".join(parts))
        records.append(record)
        parts = []
    return records


def wandb(run_dir: str) -> dict:
    """The run as ``wandb sync`` uploads its offline-run folders (``<run_dir>/wandb/offline-run-*``): one per
    command, all under one run id, synced one after the other in the order they started, each later one
    resuming the run (so its run record must ask for a resume: without it, it would replace the run's history).
    """
    logs = [_wandb_records(path) for path in Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")]
    assert logs, f"no offline run under {run_dir}/wandb"
    runs = [next(record.run for record in log if record.WhichOneof("record_type") == "run") for log in logs]
    assert len({run.run_id for run in runs}) == 1, f"the offline runs must share one run id: {[r.run_id for r in runs]}"
    order = sorted(range(len(logs)), key=lambda i: runs[i].start_time.ToNanoseconds())
    assert all(runs[i].resume for i in order[1:]), "a continued command's offline run must resume the run"
    name, config, series = None, {}, {}
    for record in (record for i in order for record in logs[i]):
        which = record.WhichOneof("record_type")
        if which == "run":
            name = record.run.display_name
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif which == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif which == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            for key, value in row.items():
                if not key.startswith("_"):
                    series.setdefault(key, []).append([row["_step"], value])
    config.pop("_wandb", None)
    return {"name": name, "config": config, "series": series}


def neptune(data_dir: str) -> list[dict]:
    """Each offline run under ``data_dir``, in the order they were created (Neptune's offline runs cannot be
    continued: a continued command records one of its own, which ``neptune sync`` uploads as a run of its own).

    A run is ``.neptune/offline/run__*/``: ``metadata.json`` and its operation log, ``data-*.log``, one JSON
    operation a line.
    """
    runs = []
    folders = sorted(Path(data_dir).glob("offline/run__*"), key=lambda run: _created_at(run / "metadata.json"))
    for run in folders:
        name, config, series = None, {}, {}
        for log in sorted(run.glob("data-*.log")):
            for line in log.read_text().splitlines():
                op = json.loads(line)["obj"]
                path = op["path"]
                if path == ["sys", "name"]:
                    name = op["value"]
                elif path[0] == "config" and op["type"].startswith("Assign"):
                    config[path[1]] = op["value"]
                elif op["type"] == "LogFloats" and path[0] != "monitoring":
                    series.setdefault("/".join(path), []).extend([v["step"], v["value"]] for v in op["values"])
        runs.append({"name": name, "config": config, "series": series})
    return runs


def _created_at(metadata: Path) -> str:
    return json.loads(metadata.read_text())["createdAt"]  # ISO 8601, in UTC: sorts as the times do


def one_after_the_other(runs: list[dict]) -> dict:
    """Several runs' records as one run would hold them: the series of each run after the last one's, under the
    last run's name and config (what a tracker that cannot continue a run shows over its runs)."""
    series = {}
    for run in runs:
        for key, points in run["series"].items():
            series.setdefault(key, []).extend(points)
    return {**runs[-1], "series": series}


def clearml(offline_dir: str) -> dict:
    """The offline session: ``task.json`` (name, hyperparameters) and ``metrics.jsonl`` (scalar reports)."""
    session = one([p for p in Path(offline_dir).glob("offline-*") if p.is_dir()])
    task = json.loads((session / "task.json").read_text())
    config = {key: entry.get("value") for key, entry in task["hyperparams"]["config"].items()}
    series = {}
    for line in (session / "metrics.jsonl").read_text().splitlines():
        for event in json.loads(line):
            if event["type"] == "training_stats_scalar":
                series.setdefault(f"{event['metric']}/{event['variant']}", []).append([event["iter"], event["value"]])
    return {"name": task["name"], "config": config, "series": series}


def polyaxon(offline_root: str) -> dict:
    """The offline run: ``runs/<uuid>/run.plx.json`` and one ``step|timestamp|metric`` file per metric."""
    run = one(sorted(Path(offline_root).glob("runs/*")))
    meta = json.loads((run / "run.plx.json").read_text())
    series = {}
    for path in sorted((run / "events" / "metric").glob("*.plx")):
        rows = [line.split("|") for line in path.read_text().splitlines()[1:]]
        series[path.stem.replace("__", "/")] = [[int(step), float(value)] for step, _, value in rows]
    return {"name": meta["name"], "config": meta["inputs"], "series": series}


def _post(url: str, payload: dict) -> object:
    with urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(payload).encode()), timeout=30) as reply:
        return json.loads(reply.read())


def visdom(server: str) -> dict:
    """The one environment besides ``main`` that the live server at ``server`` (``http://host:port``) holds.

    The same requests as ``visdom.Visdom.get_env_list()`` (POST ``/env_state``) and
    ``get_window_data(env=...)`` (POST ``/win_data``).
    """
    envs = [env for env in _post(f"{server}/env_state", {}) if env != "main"]
    assert len(envs) == 1, f"expected one environment besides main, found {envs}"
    env = envs[0]
    windows = _post(f"{server}/win_data", {"eid": env, "win": None}).values()
    config, series = None, {}
    titles = [window["title"] for window in windows]
    assert len(titles) == len(set(titles)), f"one window per plot (a continued run plots on in its windows): {titles}"
    for window in windows:
        if window["type"] == "text":
            config = yaml.safe_load(html.unescape(re.fullmatch(r"<pre>(.*)</pre>", window["content"], re.S)[1]))
        else:
            (trace,) = window["content"]["data"]
            series[window["title"]] = [[int(x), y] for x, y in zip(trace["x"], trace["y"], strict=True)]
    return {"name": env, "config": config, "series": series}


if __name__ == "__main__":
    tracker, where = sys.argv[1:]
    print(json.dumps(globals()[tracker](where)))
