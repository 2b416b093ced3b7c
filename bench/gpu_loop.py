"""The generated trainer against a hand-written loop of the same step, per precision, compile and memory format
(run in a baked project by bench/gpu.py; prints one JSON line).

Usage (cwd = a baked project): python gpu_loop.py TEMPLATE JSON, JSON holding the options of ``main``'s
``Options``. On a GPU (``device`` cuda) every setting of ``settings(template)``; on the CPU (``tiny``) fp32 only,
with the vision model replaced by a tiny one, so that the trainers' own per-iteration cost is what differs.

Both loops take the same batches, held in memory (the first ``CACHED_BATCHES`` of the project's own loader,
cycled; pinned on a GPU): what is compared is the step and what the trainer does around it, not the data. The
project's loader is measured apart: the generated trainer with its loader at ``num_workers`` 2 (the default) and
0, and the time each step waited for its batch (ignite's GET_BATCH_STARTED to GET_BATCH_COMPLETED: on a GPU the
host waits there only when the loader is slower than the step, the device's queue then runs dry).

The hand-written loop implements every setting itself (autocast to float16 with a gradient scaler, or to
bfloat16; ``torch.compile``; channels-last weights and images). The generated trainer runs a setting only where
its config.yaml can say it (``project_overrides``); elsewhere its cells are "n/a".
"""

import contextlib
import dataclasses
import gc
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loop  # noqa: E402  (bench/loop.py: also puts the project, the cwd, on sys.path)
from loop import fingerprint, same_schedule, seed_everything  # noqa: E402

PRECISIONS = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
# The templates whose models are convolutional: channels-last memory applies to them (not to text's encoder).
CONVOLUTIONAL = {"vision-classification", "gan", "vision-segmentation"}
CACHED_BATCHES = 8
FULL_SIZE = False  # set by measure: the projects' own sizes (GPU), or loop.py's small segmentation (CPU)


@dataclasses.dataclass(frozen=True)
class Setting:
    precision: str = "fp32"
    compile: bool = False
    channels_last: bool = False

    @property
    def label(self) -> str:
        words = [self.precision, "compile" if self.compile else "eager"]
        return ", ".join(words + (["channels-last"] if self.channels_last else []))


def settings(template: str) -> list[Setting]:
    """Every setting a template is measured at: precision x compile x (convolutional models) memory format."""
    formats = (False, True) if template in CONVOLUTIONAL else (False,)
    return [Setting(p, c, f) for c in (False, True) for f in formats for p in PRECISIONS]


# How the generated project says each setting in its config.yaml: (key, setting field, {setting value: key value}).
# The first key the project has decides; a value it does not list cannot be said (the cells read "n/a (not an
# option yet)"); a project without any key of a field runs that field's default only (DEFAULTS). The projects say the
# precision and compile; channels_last is planned: when they gain it, nothing here changes.
PROJECT_OPTIONS = [
    ("mixed_precision", "precision", {"fp32": None, "fp16": "float16", "bf16": "bfloat16"}),
    ("compile", "compile", {False: False, True: True}),
    ("channels_last", "channels_last", {False: False, True: True}),
]
DEFAULTS = {"precision": "fp32", "compile": False, "channels_last": False}


def project_overrides(keys: set[str], setting: Setting) -> dict | None:
    """The config overrides that make the generated project run ``setting``, or None where it cannot yet."""
    overrides = {}
    for field, default in DEFAULTS.items():
        value = getattr(setting, field)
        option = next(((key, values) for key, name, values in PROJECT_OPTIONS if name == field and key in keys), None)
        if option is None:
            if value != default:
                return None
            continue
        key, values = option
        if value not in values:
            return None
        overrides[key] = values[value]
    return overrides


class InMemory:
    """The same few batches, in order, as a loader gives them: both loops take these."""

    def __init__(self, batches: list) -> None:
        self.batches = batches
        self.dataset = None

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator:
        return iter(self.batches)


class SlowLoader(InMemory):
    """A loader that takes ``seconds`` per batch: what the data-wait clock must see (the tests' check)."""

    def __init__(self, batches: list, seconds: float) -> None:
        super().__init__(batches)
        self.seconds = seconds

    def __iter__(self) -> Iterator:
        for batch in self.batches:
            time.sleep(self.seconds)
            yield batch


def pinned(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return {k: pinned(v) for k, v in batch.items()}
    return type(batch)(pinned(v) for v in batch)


def project_train_loader(template: str, config: Any) -> Iterable:
    """The project's own training loader, as its main.py builds it."""
    import data

    if template == "gan":
        return data.setup_data(config)
    if template == "text-classification":
        return data.setup_data(config, data.setup_tokenizer(config))[0]
    return data.setup_data(config)[0]


def cached_batches(template: str, config: Any, device: torch.device) -> list:
    seed_everything(config.seed)
    batches = list(itertools.islice(project_train_loader(template, config), CACHED_BATCHES))
    return [pinned(b) for b in batches] if device.type == "cuda" else batches


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def start_memory(device: torch.device) -> None:
    gc.collect()  # the last run's models and optimizer states are garbage now: not this run's peak
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


class WaitClock:
    """Seconds the engine waited for each batch (GET_BATCH_STARTED to GET_BATCH_COMPLETED) while ``on``."""

    def __init__(self, engine: Any) -> None:
        from ignite.engine import Events

        self.on, self.waits, self._start = False, [], 0.0
        engine.add_event_handler(Events.GET_BATCH_STARTED, self._started)
        engine.add_event_handler(Events.GET_BATCH_COMPLETED, self._completed)

    def _started(self, _engine: Any) -> None:
        self._start = time.perf_counter()

    def _completed(self, _engine: Any) -> None:
        if self.on:
            self.waits.append(time.perf_counter() - self._start)

    def ms_per_step(self) -> float:
        return 1000 * sum(self.waits) / len(self.waits)


@contextlib.contextmanager
def patched(module: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def tiny_model(*_args: Any, num_classes: int = 10, **_kwargs: Any) -> torch.nn.Module:
    """A model that costs next to nothing a step: what is left is the loop around it (CPU mode)."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, num_classes),
    )


@contextlib.contextmanager
def models_of(tiny: bool) -> Iterator[None]:
    """With ``tiny``, the vision project's model (main.py's and models.py's setup_model) replaced by ``tiny_model``."""
    if not tiny:
        yield
        return
    import main
    import models

    with patched(main, "setup_model", tiny_model), patched(models, "setup_model", tiny_model):
        yield


def generated(
    config: Any, iterations: int, device: torch.device, loader: Iterable | None, tiny: bool = False, wait: bool = True
) -> dict:
    """Run main.run; time the iterations after the warm-up, handlers included; with ``wait``, the data wait of each
    step (two handlers more on the trainer: left out where the loops are compared).

    ``loader``: the batches the trainer takes in place of the project's loader; None: the project's own (its
    ``num_workers`` as the config says).
    """
    import main
    from ignite.engine import Engine, Events

    marks: dict[str, Any] = {}
    build_trainer = main.setup_trainer

    def setup_data(*args: Any, **kwargs: Any) -> Any:
        built = original_setup_data(*args, **kwargs)
        if loader is None:
            return built
        return (loader, *built[1:]) if isinstance(built, tuple) else loader

    def start(_engine: Engine) -> None:
        synchronize(device)
        if marks["clock"]:
            marks["clock"].on = True
        marks["start"] = time.perf_counter()

    def stop(engine: Engine) -> None:
        synchronize(device)
        marks["end"] = time.perf_counter()
        marks["peak"] = peak_mib(device)
        engine.terminate()

    def setup_trainer(*args: Any, **kwargs: Any) -> Engine:
        marks["modules"] = [a for a in args if isinstance(a, torch.nn.Module) and list(a.parameters())]
        trainer = build_trainer(*args, **kwargs)
        marks["clock"] = WaitClock(trainer) if wait else None

        def run(*run_args: Any, **run_kwargs: Any) -> Any:
            # Added as fit starts the run, after all of fit's handlers: the last timed iteration includes theirs.
            trainer.add_event_handler(Events.ITERATION_COMPLETED(once=loop.WARMUP), start)
            trainer.add_event_handler(Events.ITERATION_COMPLETED(once=loop.WARMUP + iterations), stop)
            return Engine.run(trainer, *run_args, **run_kwargs)

        trainer.run = run
        return trainer

    original_setup_data = main.setup_data
    start_memory(device)
    with patched(main, "setup_trainer", setup_trainer), patched(main, "setup_data", setup_data), models_of(tiny):
        main.run(0, config)
    return {
        "it_s": iterations / (marks["end"] - marks["start"]),
        "weights": fingerprint(*marks["modules"]),
        "peak_mib": marks["peak"],
        "wait_ms": marks["clock"].ms_per_step() if marks["clock"] else None,
    }


def without_progress_bar(*args: Any) -> dict:
    """``generated``, with ignite's ProgressBar attaching nothing (handlers.setup_handlers attaches one)."""
    from ignite.handlers import ProgressBar

    with patched(ProgressBar, "attach", lambda *_args, **_kwargs: None):
        return generated(*args)


class Amp:
    """The hand-written loop's precision: autocast to float16 (with a gradient scaler) or bfloat16, or none."""

    def __init__(self, setting: Setting, device: torch.device) -> None:
        self.dtype, self.device = PRECISIONS[setting.precision], device
        self.scaler = torch.amp.GradScaler(device.type, enabled=setting.precision == "fp16")

    def autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None)


def to_device(batch: Any, device: torch.device, channels_last: bool) -> Any:
    """A batch on the device; its images (4-d tensors) channels-last when asked."""
    if isinstance(batch, dict):
        return {k: to_device(v, device, channels_last) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device, channels_last) for v in batch)
    moved = batch.to(device, non_blocking=True)
    return moved.contiguous(memory_format=torch.channels_last) if channels_last and moved.dim() == 4 else moved


def prepared(module: torch.nn.Module, setting: Setting, device: torch.device) -> tuple[torch.nn.Module, Callable]:
    """The module on the device (channels-last when asked), and what the loop calls: it, or it compiled."""
    module.to(device)
    if setting.channels_last:
        module.to(memory_format=torch.channels_last)
    return module, torch.compile(module) if setting.compile else module


def supervised_loop(
    config: Any,
    iterations: int,
    setting: Setting,
    device: torch.device,
    batches: list,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    warmup_steps: int,
    unpack: Callable[[Any], tuple[tuple[torch.Tensor, ...], torch.Tensor]],
    loss_fn: Callable,
) -> dict:
    """Forward in autocast, loss, scaled backward, an optimizer step every ``accumulation_steps``, main.py's
    LR schedule: trainers.setup_trainer's step and machinery.backend's calls, written out."""
    model, forward = prepared(model, setting, device)
    total = config.max_epochs * config.train_epoch_length
    scheduler = same_schedule(optimizer, [(0, 0.0), (warmup_steps, 1.0), (total, 0.0)])
    accumulation_steps, amp = config.accumulation_steps, Amp(setting, device)
    data = itertools.cycle(batches)
    model.train()
    for i in range(loop.WARMUP + iterations):
        if i == loop.WARMUP:
            synchronize(device)
            start = time.perf_counter()
        inputs, targets = unpack(to_device(next(data), device, setting.channels_last))
        with amp.autocast():
            loss = loss_fn(forward(*inputs), targets)
        amp.scaler.scale(loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            amp.scaler.step(optimizer)
            amp.scaler.update()
            optimizer.zero_grad()
        scheduler.step()
    loss.item()
    synchronize(device)
    rate = iterations / (time.perf_counter() - start)
    return {"it_s": rate, "weights": fingerprint(model), "peak_mib": peak_mib(device)}


def images(batch: Any) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The model's inputs and the targets of an (images, labels or masks) batch."""
    return (batch[0],), batch[1]


def vision_hand_written(config: Any, iterations: int, setting: Setting, device: torch.device, batches: list) -> dict:
    import data
    import models

    seed_everything(config.seed)
    _, _, classes = data.setup_data(config)
    model = models.setup_model(config.model, num_classes=len(classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    warmup = config.train_epoch_length
    return supervised_loop(config, iterations, setting, device, batches, model, optimizer, warmup, images, loss_fn)


def segmentation_hand_written(
    config: Any, iterations: int, setting: Setting, device: torch.device, batches: list
) -> dict:
    import data
    import models

    seed_everything(config.seed)
    _, _, classes = data.setup_data(config)
    model = models.setup_model(config.model, len(classes), config.weights_backbone)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    loss_fn = models.SegmentationLoss(config.aux_loss_weight)
    warmup = config.train_epoch_length
    return supervised_loop(config, iterations, setting, device, batches, model, optimizer, warmup, images, loss_fn)


def text_hand_written(config: Any, iterations: int, setting: Setting, device: torch.device, batches: list) -> dict:
    _, model, optimizer, warmup = loop.text_parts(config)
    loss_fn = torch.nn.CrossEntropyLoss()
    return supervised_loop(
        config, iterations, setting, device, batches, model, optimizer, warmup, loop.text_inputs, loss_fn
    )


def gan_hand_written(config: Any, iterations: int, setting: Setting, device: torch.device, batches: list) -> dict:
    """The DCGAN step (discriminator on real then generated images, then the generator), one scaler for both."""
    import data
    import models

    seed_everything(config.seed)
    data.setup_data(config)
    generator = models.Generator(config.z_dim, config.g_filters, config.channels, config.image_size)
    discriminator = models.Discriminator(config.channels, config.d_filters, config.image_size)
    betas = (config.beta1, 0.999)
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=config.lr, betas=betas)
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=config.lr, betas=betas)
    generator, generate = prepared(generator, setting, device)
    discriminator, discriminate = prepared(discriminator, setting, device)
    loss_fn, amp = torch.nn.BCEWithLogitsLoss(), Amp(setting, device)

    def loss(images: torch.Tensor, target: float) -> torch.Tensor:
        with amp.autocast():
            logits = discriminate(images)
            return loss_fn(logits, torch.full_like(logits, target))

    data_batches = itertools.cycle(batches)
    generator.train()
    discriminator.train()
    for i in range(loop.WARMUP + iterations):
        if i == loop.WARMUP:
            synchronize(device)
            start = time.perf_counter()
        real = to_device(next(data_batches)[0], device, setting.channels_last)
        with amp.autocast():
            fake = generate(torch.randn(real.shape[0], config.z_dim, 1, 1, device=device))
        optimizer_d.zero_grad()
        amp.scaler.scale(loss(real, 1.0)).backward()
        amp.scaler.scale(loss(fake.detach(), 0.0)).backward()
        amp.scaler.step(optimizer_d)
        optimizer_g.zero_grad()
        loss_g = loss(fake, 1.0)
        amp.scaler.scale(loss_g).backward()
        amp.scaler.step(optimizer_g)
        amp.scaler.update()
    loss_g.item()
    synchronize(device)
    rate = iterations / (time.perf_counter() - start)
    return {"it_s": rate, "weights": fingerprint(generator, discriminator), "peak_mib": peak_mib(device)}


HAND_WRITTEN = {
    "vision-classification": vision_hand_written,
    "text-classification": text_hand_written,
    "gan": gan_hand_written,
    "vision-segmentation": segmentation_hand_written,
}


def hand_written(
    template: str, config: Any, iterations: int, setting: Setting, device: torch.device, batches: list, tiny: bool
) -> dict:
    start_memory(device)
    with models_of(tiny):
        return HAND_WRITTEN[template](config, iterations, setting, device, batches)


@dataclasses.dataclass
class Options:
    device: str = "cuda"
    tiny: bool = False  # CPU mode: the vision model replaced by tiny_model
    iterations: int = 0  # timed iterations per run; 0: as many as fit in window_s, measured by a first run
    window_s: float = 1.5
    repeats: int = 3  # runs of each loop per setting, alternating; compiled ones run once
    warmup: int = 10
    deadline: float = 0.0  # time.time() after which no new setting starts (0: none); its rows say skipped
    compile_reserve_s: float = 60.0  # a compiled setting starts only this long before the deadline (it compiles)
    result_path: str = ""  # where the result so far is written after each setting (read if the run is stopped)
    settings: list | None = None  # labels of the settings to measure (None: all of settings(template))
    wait_workers: tuple = (2, 0)  # the project's loader, at these num_workers: data wait of the generated trainer
    wait_iterations: int = 30
    wait_warmup: int = 5
    # A third loop beside fp32's two: the generated trainer with ignite's ProgressBar not attached (the CPU mode's
    # diagnosis of the per-iteration cost: the bar redraws at every iteration).
    without_bar: bool = False


def config_for(iterations: int, output_dir: str, **overrides: Any) -> Any:
    """loop.py's config (synthetic data, one epoch a bit longer than the run, no backend), with ``overrides``.

    On a GPU (``FULL_SIZE``) segmentation keeps its config.yaml's crop and batch (loop.py shrinks them for the CPU).
    """
    from config import Config

    base = loop.load_config(iterations, output_dir)
    keys = set(type(base).model_fields)
    if FULL_SIZE:
        defaults = Config()
        overrides = {**{k: getattr(defaults, k) for k in loop.SEGMENTATION if k in keys}, **overrides}
    return base.model_copy(update={k: v for k, v in overrides.items() if k in keys})


def config_keys() -> set[str]:
    from config import Config

    return set(Config.model_fields)


def measure(template: str, options: Options, out: tempfile.TemporaryDirectory | str) -> dict:
    """Every setting's figures, as the JSON line main prints."""
    global FULL_SIZE
    device = torch.device(options.device)
    loop.WARMUP, FULL_SIZE = options.warmup, device.type == "cuda"
    keys = config_keys()
    base = project_overrides(keys, Setting()) or {}
    batches = cached_batches(template, config_for(1, out, num_workers=0, **base), device)
    # The data-wait runs stay within one pass over the loader: a second pass starts its workers again, a stall that
    # is not the steady state's.
    per_pass = len(project_train_loader(template, config_for(1, out, num_workers=0, **base)))
    loader = InMemory(batches)
    # One untimed round of each loop: the process's first model and steps pay one-off costs (and, unless told,
    # it says how many iterations fill the window).
    first = hand_written(template, config_for(3, out, **base), 3, Setting(), device, batches, options.tiny)
    generated(config_for(3, out, num_workers=0, **base), 3, device, loader, options.tiny)
    iterations = options.iterations or max(10, min(1000, round(options.window_s * first["it_s"])))
    chosen = [s for s in settings(template) if options.settings is None or s.label in options.settings]
    rows: list[dict] = []
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    result = {"template": template, "device": device_name, "iterations": iterations, "rows": rows}
    result["torch"] = torch.__version__
    # Every row up front, skipped until measured: a run stopped by the budget still has each.
    for setting in chosen:
        rows.append({"setting": dataclasses.asdict(setting), "label": setting.label, "skipped": "time budget"})
    write(options.result_path, result)
    for setting, row in zip(chosen, rows, strict=True):
        reserve = options.compile_reserve_s if setting.compile else 0.0
        if options.deadline and time.time() + reserve > options.deadline:
            continue
        del row["skipped"]
        overrides = project_overrides(keys, setting)
        if overrides is None:
            row["not_generated"] = "not an option yet"
        elif setting.precision == "fp16" and device.type != "cuda":
            overrides, row["not_generated"] = None, "CUDA only"  # the projects' float16 trains in float32 elsewhere
        loops: dict[str, Callable[[], dict]] = {
            "hand_written": lambda s=setting: hand_written(
                template, config_for(iterations, out, **base), iterations, s, device, batches, options.tiny
            )
        }
        if overrides is not None:
            loops["generated"] = lambda o=overrides: generated(
                config_for(iterations, out, num_workers=0, **o), iterations, device, loader, options.tiny, wait=False
            )
        if options.without_bar and overrides is not None and setting == Setting():
            loops["generated_without_bar"] = lambda o=overrides: without_progress_bar(
                config_for(iterations, out, num_workers=0, **o), iterations, device, loader, options.tiny, False
            )
        runs: dict[str, list[dict]] = {name: [] for name in loops}
        for i in range(1 if setting.compile else options.repeats):  # alternate the order: noise hits both alike
            for name in sorted(loops, reverse=i % 2 == 1):
                runs[name].append(loops[name]())
        for name, results in runs.items():
            row[name] = {
                "it_s": statistics.median(r["it_s"] for r in results),
                "peak_mib": max((r["peak_mib"] for r in results if r["peak_mib"] is not None), default=None),
                "weights": [r["weights"] for r in results],
            }
        if overrides is not None:
            row["data_wait"] = {}
            # Fewer for a slow step (segmentation's); within one pass of the loader, after its own warm-up (the
            # workers' start and their first batches).
            waited = max(3, min(options.wait_iterations, iterations, per_pass - options.wait_warmup - 1))
            for workers in options.wait_workers:
                with patched(loop, "WARMUP", options.wait_warmup):
                    config = config_for(waited, out, num_workers=workers, **overrides)
                    r = generated(config, waited, device, None, options.tiny)
                row["data_wait"][str(workers)] = {"ms": r["wait_ms"], "it_s": r["it_s"]}
        write(options.result_path, result)
    return result


def write(path: str, result: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(result))


def main() -> None:
    template, options = sys.argv[1], Options(**json.loads(sys.argv[2]))
    with tempfile.TemporaryDirectory() as out:
        print(json.dumps(measure(template, options, out)))


if __name__ == "__main__":
    main()
