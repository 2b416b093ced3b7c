"""Print where the suite's time went, as the Markdown tables of CONTRIBUTING.md ("What the suite costs").

    IGNITE_TEMPLATES_COSTS=/tmp/costs bash scripts/test.sh
    python scripts/suite_costs.py /tmp/costs [--slowest 30]

tests/suite_costs.py records each test (one JSON lines file per pytest worker): its wall time on its
worker, the CPU time of its process and the processes it waited for, and the seconds spent in each kind
of work (bakes, training runs, notebooks, fresh venvs, ...). Wall time not spent in those is the test's own
checks and set-up ("in the test").
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path

IN_TEST = "in the test"


def load(directory: Path) -> list[dict]:
    records = [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]
    for record in records:
        record["kinds"][IN_TEST] = max(0.0, record["wall"] - sum(record["kinds"].values()))
    return records


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def work_totals(records: list[dict]) -> dict[str, float]:
    """The seconds of each kind of work, added up over the records."""
    totals: dict[str, float] = defaultdict(float)
    for record in records:
        for kind, seconds in record["kinds"].items():
            totals[kind] += seconds
    return totals


def report(records: list[dict], slowest: int) -> str:
    span = max(r["start"] + r["wall"] for r in records) - min(r["start"] for r in records)
    workers = sorted({r["worker"] for r in records})
    busy = {w: sum(r["wall"] for r in records if r["worker"] == w) for w in workers}
    total = sum(r["wall"] for r in records)
    out = [
        f"{len(records)} tests; tests' wall clock {minutes(span)} min on {len(workers)} worker(s), "
        + ", ".join(f"{w} busy {minutes(s)} min" for w, s in busy.items())
        + f"; worker time {minutes(total)} min, CPU time {minutes(sum(r['cpu'] for r in records))} min.",
        "",
    ]

    kinds = sorted(work_totals(records).items(), key=lambda x: -x[1])
    rows = [[kind, minutes(s), f"{100 * s / total:.0f}%"] for kind, s in kinds]
    out += ["Where the worker time goes:", "", table(["work", "worker min", "share"], rows), ""]

    files: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        files[record["nodeid"].split("::")[0]].append(record)
    rows = []
    for name, tests in sorted(files.items(), key=lambda x: -sum(r["wall"] for r in x[1])):
        worker = sum(r["wall"] for r in tests)
        wall = max(r["start"] + r["wall"] for r in tests) - min(r["start"] for r in tests)
        mix = sorted(work_totals(tests).items(), key=lambda x: -x[1])[:2]
        top = ", ".join(f"{k} {100 * s / worker:.0f}%" for k, s in mix)
        cpu = sum(r["cpu"] for r in tests)
        longest = max(r["wall"] for r in tests)
        rows.append([name, len(tests), minutes(worker), minutes(wall), minutes(cpu), f"{longest:.0f}", top])
    header = ["file", "tests", "worker min", "wall span min", "CPU min", "slowest s", "mostly"]
    out += ["Per test file:", "", table(header, rows), ""]

    rows = []
    for record in sorted(records, key=lambda r: -r["wall"])[:slowest]:
        mix = sorted(record["kinds"].items(), key=lambda x: -x[1])
        parts = ", ".join(f"{k} {s:.0f}" for k, s in mix if s >= 1)
        name = record["nodeid"].split("/")[-1]
        name = name if len(name) <= 100 else name[:99] + "…]"  # the pairwise matrix's ids are long
        rows.append([f"`{name}`", f"{record['wall']:.0f}", f"{record['cpu']:.0f}", parts])
    out += [f"The {slowest} slowest tests:", "", table(["test", "wall s", "CPU s", "seconds of each work"], rows)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--slowest", type=int, default=30)
    args = parser.parse_args()
    print(report(load(args.directory), args.slowest))


if __name__ == "__main__":
    main()
