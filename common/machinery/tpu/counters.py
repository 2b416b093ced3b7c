"""A TPU run's XLA counts per epoch (compilations, device-to-host transfers, CPU fallbacks) in ``xla_metrics.json``."""

import json
import logging
from pathlib import Path

import ignite.distributed as idist
import torch_xla.debug.metrics as met
from ignite.engine import Engine, Events


def _xla_count(name: str) -> int:
    data = met.metric_data(name)
    return 0 if data is None else data[0]


def _cpu_fallbacks() -> dict[str, int]:
    """CPU runs so far of each PyTorch op without an XLA lowering (not .item()'s _local_scalar_dense: a read)."""
    names = (name for name in met.counter_names() if name.startswith("aten::") and "_local_scalar" not in name)
    return {name: met.counter_value(name) for name in names}


def setup_xla_metrics(trainer: Engine, run_dir: Path, logger: logging.Logger) -> None:
    """Count XLA compilations, device-to-host transfers and CPU fallbacks per epoch (epoch-end work apart: attach first)
    in ``xla_metrics.json``. A healthy loop stops compiling after an epoch or two and reads the device only to log."""
    counts: dict[str, list] = {
        "compilations_per_epoch": [],
        "device_to_host_transfers_per_epoch": [],
        "cpu_fallbacks_per_epoch": [],
        "eval_compilations_per_epoch": [],
        "eval_device_to_host_transfers_per_epoch": [],
    }
    mark = {}

    def now() -> tuple[int, int, dict[str, int]]:
        return _xla_count("CompileTime"), _xla_count("TransferFromDeviceTime"), _cpu_fallbacks()

    def record(prefix: str, since: tuple[int, int, dict[str, int]]) -> None:
        compiles, transfers, fallbacks = now()
        counts[f"{prefix}compilations_per_epoch"].append(compiles - since[0])
        counts[f"{prefix}device_to_host_transfers_per_epoch"].append(transfers - since[1])
        if not prefix:
            new = {name: count - since[2].get(name, 0) for name, count in fallbacks.items()}
            counts["cpu_fallbacks_per_epoch"].append({name: count for name, count in new.items() if count})

    @trainer.on(Events.EPOCH_STARTED)
    def start_epoch() -> None:
        if "eval" in mark:  # the previous epoch's evaluation has ended
            record("eval_", mark.pop("eval"))
        mark["train"] = now()

    @trainer.on(Events.EPOCH_COMPLETED)
    def end_epoch() -> None:
        record("", mark.pop("train"))
        mark["eval"] = now()

    @trainer.on(Events.COMPLETED)
    def write() -> None:
        if "eval" in mark:
            record("eval_", mark.pop("eval"))
        if idist.get_rank() == 0:
            (run_dir / "xla_metrics.json").write_text(json.dumps(counts, indent=2) + "\n")
            logger.info(
                "XLA training: compilations per epoch %s, device-to-host transfers per epoch %s, CPU fallbacks %s",
                counts["compilations_per_epoch"],
                counts["device_to_host_transfers_per_epoch"],
                counts["cpu_fallbacks_per_epoch"],
            )
