"""N XLA replicas on the CPU, with working collectives: the harness that runs TPU projects as 8 replicas.

Imported at start-up (sitecustomize.py) when ``XLA_CPU_REPLICAS=N`` is set, before anything starts the XLA
runtime. The runtime then has N CPU devices, whose replicas ``torch_xla.launch`` runs as N threads of one
process (measured with torch_xla 2.9.0: one process per replica makes N worlds of one). A generated TPU
project trains unchanged, with its README's command. Threads of one process meet problems that a TPU's
processes, one per chip, never do; each is met here, in torch_xla or ignite as the project finds them:

- XLA:CPU keys a collective's rendezvous on the compiled module when no channel id is set (torch_xla sets
  none): replicas that compile the same graph at once get different modules and each waits alone.
  Compiling is serialised (a lock around the step marker, taken once the replica's device has drained),
  so every replica runs the one cached executable.
- Reading an XLA tensor on the host (``.item()``, ``.tolist()``, ``.cpu()``, ...) compiles the graph that
  computes it outside that lock: each read syncs first here.
- A sync with nothing pending on the replica's device waits for the *default* device (ordinal 0) to finish
  its last execution; when that is replica 0's collective, which waits for this replica, neither moves
  and XLA aborts after 10 s (the ``xm.rendezvous`` that ignite calls first, at 4 replicas and more). Each
  sync here carries a value of the replica's own device, so it waits for that device only.
- A collective in a graph that differs between replicas never meets its peers (each graph is a module of
  its own). ignite's ``broadcast`` zeroes the tensor in the graph on every replica but the source; here
  every replica runs one graph, which keeps the source's values by a mask sent as data. ``xm.all_gather``
  pads by ordinal-dependent constants unless ``pin_layout=False``.
- ignite keeps its distributed state in module globals, which the threads share: a replica that finds
  none builds it with an all-reduce (of processes per node) the others skip, and one that ends clears it
  under the others. Here that count is the process's devices, found without a collective, and the state
  is cleared once every replica has ended.
- Logging: a TPU's replicas 1 to 7 are processes whose loggers have no handlers; as threads they would
  write to replica 0's, and ignite's ``setup_logger`` in each would remove replica 0's handlers. Their
  loggers are left alone and their records dropped, so ``training.log`` reads as on a TPU.
- Random state: each of a TPU's processes has its own CPU random generator; the threads share one. The
  seed ignite's ``DeterministicEngine`` draws from it at its start (it reseeds from that seed each epoch:
  data order, noise, dropout) would depend on how the threads interleave their draws; here it is drawn
  from a generator of the replica's own, seeded as the replica last seeded torch (``config.seed + rank``).
  The networks' initial weights stay drawn from the shared one: which ones replica 0 gets (and so every
  replica, from ``start_alike``) depends on the interleaving, so two runs never stopped are not bit-identical
  here, where on a TPU they are; a run continued from a checkpoint is.
- XLA:CPU gives a collective 10 s for every replica to arrive, then aborts the process; a TPU's runtime
  waits far longer. Threads that share 2 cores with the suite's other worker can lag more than that behind
  one another (replica 0 writes a checkpoint, say, while the others reach the next step's all-reduce).
  A replica that has a collective pending waits here, in Python, for every replica to reach its sync before
  its program runs: all then arrive within milliseconds. Every replica issues the same collectives, in the
  same order, so the n-th such sync of each meets the n-th of the others.
- ``PJRT_CPU_ASYNC_CLIENT=false`` (the asynchronous client hangs when a collective program runs again) and
  a thread pool of at least N (its default is the number of cores).

``XLA_CPU_REPLICAS_UNREDUCED=1`` makes ``xm.optimizer_step`` step without all-reducing the gradients: the
negative control of the tests that every replica ends with the same weights.
"""

import logging
import os
import threading

REPLICAS = int(os.environ["XLA_CPU_REPLICAS"])
os.environ.update(
    PJRT_DEVICE="CPU",
    CPU_NUM_DEVICES=str(REPLICAS),
    PJRT_CPU_ASYNC_CLIENT="false",
    XLA_THREAD_POOL_SIZE=str(max(16, 2 * REPLICAS)),
)

import ignite.distributed as idist  # noqa: E402  (after the runtime's environment)
import ignite.distributed.utils as idist_utils  # noqa: E402
import ignite.utils  # noqa: E402
import torch  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402
from ignite.distributed.comp_models.xla import _XlaDistModel  # noqa: E402
from ignite.engine.deterministic import DeterministicEngine  # noqa: E402
from torch_xla._internal import pjrt  # noqa: E402

_X = torch_xla._XLAC
_compile_lock = threading.Lock()
_collective = threading.Barrier(REPLICAS, timeout=600)  # a replica that failed breaks it for the others
_pending = threading.local()  # whether this replica's graph holds a collective not yet run


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """``torch_xla.sync`` of torch_xla 2.9.0, compiling under the lock and waiting on this replica's device."""
    device = _X._xla_get_default_device()
    _X._xla_wait_device_ops(_X._xla_real_devices([device]))  # never wait while holding the lock
    own = torch.zeros((), device=torch_xla.device()) + 1  # pending on this device: the sync waits for it only
    if getattr(_pending, "collective", False):
        _pending.collective = False
        _collective.wait()  # every replica at its sync: their programs then meet within XLA's 10 s
    with _compile_lock:
        _X._xla_step_marker(device, [], wait=False, reset_scope=reset_scope)
    del own
    if wait:
        _X._xla_wait_device_ops(_X._xla_real_devices([device]))
    if xm.is_master_ordinal():
        xm.ms.save_metrics()
    devctx = xm._run_step_closures()
    _X._set_all_reduce_token(devctx.device, None)


torch_xla.sync = sync  # xm.mark_step, MpDeviceLoader, xm.rendezvous and the projects look it up here


def _synced(read):
    """``read`` of a tensor, after a sync if it is an XLA tensor: its graph is compiled under the lock."""

    def read_after_sync(self, *args, **kwargs):
        if self.device.type == "xla":
            torch_xla.sync()
        return read(self, *args, **kwargs)

    return read_after_sync


for _name in ("item", "tolist", "cpu", "numpy", "__index__", "__int__", "__float__", "__bool__"):
    setattr(torch.Tensor, _name, _synced(getattr(torch.Tensor, _name)))
_to = torch.Tensor.to


def to(self, *args, **kwargs):
    if self.device.type == "xla" and torch._C._nn._parse_to(*args, **kwargs)[0] == torch.device("cpu"):
        torch_xla.sync()
    return _to(self, *args, **kwargs)


torch.Tensor.to = to
_all_gather = xm.all_gather
_all_reduce = xm.all_reduce


def all_gather(value, dim=0, groups=None, output=None, pin_layout=True, channel_id=None, **kwargs):
    _pending.collective = True
    return _all_gather(value, dim, groups, output, False, channel_id, **kwargs)


def all_reduce(*args, **kwargs):
    _pending.collective = True
    return _all_reduce(*args, **kwargs)


xm.all_gather = all_gather  # xm.mesh_reduce and xm.rendezvous look it up here
# xm.optimizer_step (through reduce_gradients), xm.collective_broadcast and ignite look it up here
xm.all_reduce = all_reduce


def _do_broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
    data = tensor.cpu().to(tensor.device)  # device data on every replica, however it was built
    keep = torch.tensor(self.get_rank() == src).to(tensor.device)
    result = torch.where(keep, data, torch.zeros_like(data))
    xm.all_reduce("sum", [result])
    return result


_XlaDistModel._do_broadcast = _do_broadcast
# Every replica thread of this process is on this node: the count ignite would all-reduce.
_XlaDistModel._compute_nproc_per_node = lambda self: xr.addressable_runtime_device_count()
_ended = threading.Barrier(REPLICAS)
_finalize = idist_utils.finalize


def finalize() -> None:
    _ended.wait()
    _finalize()


idist.finalize = idist_utils.finalize = finalize


_replica = threading.local()  # this replica thread's ordinal
_spawned_call = pjrt._SpawnFn.__call__


def spawned_call(self) -> None:
    _replica.ordinal = xr.global_ordinal()
    return _spawned_call(self)


pjrt._SpawnFn.__call__ = spawned_call  # what each replica thread runs
_call_handlers = logging.Logger.callHandlers


def call_handlers(self, record: logging.LogRecord) -> None:
    if getattr(_replica, "ordinal", 0) == 0:
        _call_handlers(self, record)


logging.Logger.callHandlers = call_handlers
_setup_logger = ignite.utils.setup_logger


def setup_logger(name: str | None = "ignite", *args, **kwargs) -> logging.Logger:
    if getattr(_replica, "ordinal", 0) > 0:
        return logging.getLogger(name)
    return _setup_logger(name, *args, **kwargs)


ignite.utils.setup_logger = setup_logger  # before the project imports it
_manual_seed = torch.manual_seed


def manual_seed(seed: int) -> torch.Generator:
    _replica.seed = int(seed)
    return _manual_seed(seed)


def init_run(self: DeterministicEngine) -> None:
    own = torch.Generator().manual_seed(getattr(_replica, "seed", 0))
    self.state.seed = int(torch.randint(0, int(1e9), (1,), generator=own).item())


torch.manual_seed = manual_seed  # ignite's manual_seed looks it up here
DeterministicEngine._init_run = init_run  # before the project builds its trainer

if os.environ.get("XLA_CPU_REPLICAS_UNREDUCED"):

    def optimizer_step(optimizer, barrier=False, optimizer_args={}, **kwargs):  # noqa: B006 (torch_xla's)
        return optimizer.step(**optimizer_args)

    xm.optimizer_step = optimizer_step
