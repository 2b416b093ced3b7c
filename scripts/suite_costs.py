"""Print where the suite's time went, as Markdown: CONTRIBUTING.md's one table, or the full report.

    IGNITE_TEMPLATES_COSTS=/tmp/costs bash scripts/test.sh
    python scripts/suite_costs.py /tmp/costs --table [--all-in 19.2] [--ci 1281]  # CONTRIBUTING.md's table
    python scripts/suite_costs.py /tmp/costs [--slowest 30]  # every table: the work, the files, the slowest tests

``--table`` prints the one table of CONTRIBUTING.md ("What the suite costs"): a row per test file and a last row
for the whole suite, under a line that names the pass (``--all-in``: the minutes from a fresh clone or in place,
venvs and Slurm included, which the records do not hold; ``--ci``: CI's seconds for the same code).

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


def file_row(name: str, tests: list[dict], wall: float) -> list:
    """A row of the one table: the file (or the suite), its tests, wall, worker and CPU minutes, its slowest test,
    and the two kinds of work it spent most of its worker time on."""
    worker = sum(r["wall"] for r in tests)
    mix = sorted(work_totals(tests).items(), key=lambda x: -x[1])[:2]
    mostly = ", ".join(f"{k} {100 * s / worker:.0f}%" for k, s in mix)
    cpu = sum(r["cpu"] for r in tests)
    longest = max(r["wall"] for r in tests)
    return [name, len(tests), minutes(wall), minutes(worker), minutes(cpu), f"{longest:.0f}", mostly]


def one_table(records: list[dict], all_in: float | None = None, ci: int | None = None) -> str:
    """CONTRIBUTING.md's table: a row per test file, by worker time, then the whole suite."""
    span = max(r["start"] + r["wall"] for r in records) - min(r["start"] for r in records)
    workers = sorted({r["worker"] for r in records})
    files: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        files[record["nodeid"].split("::")[0]].append(record)
    rows = []
    for name, tests in sorted(files.items(), key=lambda x: -sum(r["wall"] for r in x[1])):
        wall = max(r["start"] + r["wall"] for r in tests) - min(r["start"] for r in tests)
        rows.append(file_row(f"`{name.removeprefix('tests/')}`", tests, wall))
    rows.append(file_row(f"**the suite, {len(workers)} workers**", records, span))
    failed = sum(r.get("outcome", "passed") != "passed" for r in records)
    outcome = f"{failed} not passed" if failed else "all passed"
    line = f"{len(records)} tests ({outcome}), {minutes(span)} min of tests on {len(workers)} workers"
    line += f", {all_in:.1f} min in all" if all_in is not None else ""
    line += f"; CI {ci} s" if ci is not None else ""
    header = ["test file", "tests", "wall span min", "worker min", "CPU min", "slowest s", "where its time goes"]
    return line + ".\n\n" + table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--slowest", type=int, default=30)
    parser.add_argument("--table", action="store_true", help="only CONTRIBUTING.md's one table")
    parser.add_argument("--all-in", type=float, help="minutes in all, venvs and Slurm included (--table)")
    parser.add_argument("--ci", type=int, help="CI's seconds for the same code (--table)")
    args = parser.parse_args()
    records = load(args.directory)
    print(one_table(records, args.all_in, args.ci) if args.table else report(records, args.slowest))


if __name__ == "__main__":
    main()
