"""Which attribute names a candidate may read on a runtime value, where no module chain says what
the value is (`reach.py` asks `value_attr_refused`): a name some type it may legitimately hold has,
or one it defines itself, but never a name only file writers and other foreign types have.
"""
from __future__ import annotations

from functools import lru_cache

# Value attributes: file writers are refused as a class. An attribute read on a runtime value
# (no module chain names it) must be one that some type a candidate legitimately holds has: a
# tensor, a number, a string, a container, a torch or Triton object, or a class of its own (the
# caller adds the candidate's own names). Every method outside those types is refused, whatever
# it is called on and however it is spelled: numpy's `ndarray.dump`/`tofile`/`tobytes`, a file
# object's `write`, a pickler's `dump`; none of the types below writes a file.
VALUE_TYPE_PATHS = (
    "torch.Tensor", "torch.nn.Parameter", "torch.Size", "torch.dtype", "torch.device",
    "torch.finfo", "torch.iinfo", "torch.Generator", "torch.nn.Module",
    "torch.autograd.Function", "torch.autograd.function.FunctionCtx",
    "torch.autograd.function.BackwardCFunction", "triton.Config", "triton.runtime.jit.JITFunction",
    "triton.runtime.autotuner.Autotuner", "triton.runtime.autotuner.Heuristics",
)
# instance attributes of torch.nn layers that no class attribute names
NN_INSTANCE_ATTRS = frozenset({
    "weight", "bias", "running_mean", "running_var", "num_batches_tracked", "in_proj_weight",
    "in_proj_bias", "out_proj", "training", "q_proj_weight", "k_proj_weight", "v_proj_weight",
    "bias_k", "bias_v", "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
})
# what torch.cuda.get_device_properties returns (its class exists only in CUDA builds of torch,
# and the verdict must not depend on the parent's build), and instance state of Triton's
# launchers (`kernel.best_config` after an autotuned launch)
DEVICE_PROPERTY_ATTRS = frozenset({
    "name", "major", "minor", "total_memory", "multi_processor_count", "L2_cache_size",
    "max_threads_per_multi_processor", "regs_per_multiprocessor", "warp_size", "uuid",
    "is_integrated", "is_multi_gpu_board", "gcnArchName", "shared_memory_per_block",
    "shared_memory_per_block_optin", "shared_memory_per_multiprocessor", "max_threads_per_block",
    "clock_rate", "memory_clock_rate", "memory_bus_width", "pci_bus_id", "pci_device_id",
    "pci_domain_id",
})
# what the allowed `torch.cuda.current_stream()` returns, less its waits and raw handles
STREAM_ATTRS = frozenset({"synchronize", "query", "device", "priority"})
TRITON_INSTANCE_ATTRS = frozenset({
    "best_config", "configs", "keys", "key_idx", "arg_names", "nargs", "fn", "src", "params",
    "cache", "kernel_cache", "constexprs", "hash", "values",
})


def _named(path: str) -> object:
    """The object a dotted path names (None if it does not exist in this torch or triton)."""
    import importlib

    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _value_types() -> list[type]:
    import collections
    import dataclasses
    import enum
    import functools
    import itertools

    import torch
    import triton
    import triton.language as tl

    types_: list[type] = [object, int, float, complex, bool, str, bytes, list, tuple, dict, set,
                          frozenset, range, slice, BaseException, functools.partial,
                          collections.OrderedDict, collections.defaultdict, collections.deque,
                          collections.Counter, dataclasses.Field, enum.Enum, itertools.count]
    types_ += [t for t in map(_named, VALUE_TYPE_PATHS) if isinstance(t, type)]
    types_ += [v for v in vars(torch.nn).values()
               if isinstance(v, type) and issubclass(v, torch.nn.Module)]
    types_ += [v for v in vars(torch.return_types).values() if isinstance(v, type)]
    types_ += [v for v in vars(tl).values() if isinstance(v, type)
               and getattr(v, "__module__", "").startswith("triton.language")]
    del triton
    return types_


@lru_cache(maxsize=None)
def value_attrs() -> frozenset[str]:
    """The public attribute names of the value types a candidate may hold (see above)."""
    import inspect

    names = set(NN_INSTANCE_ATTRS | DEVICE_PROPERTY_ATTRS | TRITON_INSTANCE_ATTRS | STREAM_ATTRS)
    for t in _value_types():
        names.update(n for n in dir(t) if not n.startswith("_"))
        init = getattr(t, "__init__", None)
        try:  # a layer's constructor arguments become its attributes (`conv.stride`)
            names.update(p for p in inspect.signature(init).parameters if not p.startswith("_"))
        except (TypeError, ValueError):
            pass
        names.update(getattr(t, "__constants__", ()) or ())
        names.update(getattr(t, "_fields", ()) or ())  # torch.return_types' named fields
    return frozenset(names)


@lru_cache(maxsize=None)
def foreign_attrs() -> frozenset[str]:
    """Attributes only types a candidate must never hold have (numpy arrays and scalars, files,
    paths, picklers, raw buffers): refused even where the candidate defines the name itself, so a
    class of its own with a `dump` method does not open `ndarray.dump`."""
    import io
    import mmap
    import pathlib
    import pickle

    import numpy as np

    names: set[str] = set()
    for t in (np.ndarray, np.generic, io.IOBase, io.BufferedWriter, io.TextIOWrapper,
              pathlib.Path, pickle.Pickler, memoryview, mmap.mmap):
        names.update(n for n in dir(t) if not n.startswith("_"))
    return frozenset(names - value_attrs())


def value_attr_refused(name: str, own: frozenset[str] | set[str] = frozenset()) -> str | None:
    """Why reading `name` on a runtime value is refused (None: some value type a candidate may
    hold has it, or the candidate defines it, `own`)."""
    if name.startswith("_") or name in value_attrs() or (name in own
                                                          and name not in foreign_attrs()):
        return None
    return (f"reads {name!r} on a value, an attribute no tensor, number, string, container, "
            "torch or Triton object has (methods of other types, such as numpy's file writers "
            "ndarray.dump/tofile, are refused as a class)")
