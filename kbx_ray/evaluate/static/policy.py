"""What candidate source may name: the tables behind the static checks (`checks.py`), and the
host-API allowlist they define (`outside_host_api`).
More: kbx_ray/evaluate/static/README.md, `policy.py`.
"""
from __future__ import annotations

from functools import lru_cache

MISSING = object()

# Standard-library helper modules a candidate may import, and the names it may take from each
# (None: every public name; none of math, itertools or numbers reaches code or the OS).
STDLIB_ALLOW: dict[str, frozenset[str] | None] = {
    "math": None, "itertools": None, "numbers": None,
    "__future__": frozenset({"annotations"}),
    "typing": frozenset({
        "Any", "Optional", "Union", "Tuple", "List", "Dict", "Set", "FrozenSet", "Sequence",
        "Callable", "Iterable", "Iterator", "Mapping", "MutableMapping", "Type", "TypeVar",
        "Literal", "Final", "ClassVar", "NamedTuple", "TYPE_CHECKING", "cast", "overload",
        "Generic", "Protocol", "SupportsInt", "SupportsFloat", "Annotated", "TypeAlias",
    }),
    "functools": frozenset({"partial", "reduce", "wraps", "total_ordering", "lru_cache", "cache"}),
    "dataclasses": frozenset({"dataclass", "field", "fields", "asdict", "astuple", "replace"}),
    "enum": frozenset({"Enum", "IntEnum", "Flag", "IntFlag", "auto", "unique"}),
    "collections": frozenset({"namedtuple", "OrderedDict", "defaultdict", "deque", "Counter"}),
}
ROOTS = frozenset({"torch", "triton"})

# Builtins that reach code, files, the interpreter's namespaces or raw memory.
BANNED_NAMES = frozenset({
    "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr",
    "delattr", "getattr", "breakpoint", "input", "memoryview", "__builtins__", "help", "exit",
    "quit", "type", "id", "__loader__", "__spec__", "__file__", "__build_class__", "copyright",
    "credits", "license",
})
# Dunders a candidate may name: constructors and a class's own name.
SAFE_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__qualname__", "__doc__"})
SAFE_DUNDER_DEFS = frozenset({"__init__", "__call__", "__repr__", "__str__", "__post_init__"})

# Modules that give the OS, the interpreter or the network. Any module named so (with or without
# leading underscores), and the aliases libraries keep of them, is out of reach.
DANGER_MODULES = frozenset({
    "os", "posix", "nt", "sys", "subprocess", "builtins", "importlib", "imp", "ctypes", "cffi",
    "socket", "ssl", "selectors", "shutil", "pathlib", "io", "signal", "threading", "thread",
    "multiprocessing", "concurrent", "asyncio", "inspect", "gc", "platform", "mmap", "pickle",
    "cPickle", "marshal", "shelve", "dill", "types", "tempfile", "glob", "fcntl", "resource",
    "runpy", "pty", "pdb", "bdb", "linecache", "traceback", "logging", "urllib", "http", "ftplib",
    "smtplib", "numpy", "code", "codeop", "zipfile", "tarfile", "gzip", "weakref", "sysconfig",
    "site", "atexit", "copyreg", "tokenize", "pkgutil", "zipimport", "dis", "ast", "operator",
    "webbrowser", "getpass", "pwd", "grp", "faulthandler", "tracemalloc", "functools", "contextlib",
    "warnings", "opcode", "readline", "termios", "tty", "sqlite3", "dbm", "configparser", "netrc",
    "codecs", "uuid",
})
# Aliases of such modules that torch and triton keep (found by walking their namespaces).
MODULE_ALIASES = frozenset({
    "np", "bltns", "mp", "stdlib_re", "reducer", "reduction", "python_multiprocessing", "_sys",
    "_os", "_functools", "_thread", "_io", "_imp", "_weakref", "_ctypes", "_socket", "_pickle",
    "_posixsubprocess", "osp", "os_path", "path", "environ",
})
# Attribute names on runtime values that reach files, frames, code, raw memory or side streams.
FRAME_ATTRS = frozenset({
    "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_trace", "f_lasti", "gi_frame",
    "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended", "cr_frame", "cr_code", "cr_await",
    "cr_origin", "ag_frame", "ag_code", "ag_await", "tb_frame", "tb_next", "tb_lasti", "co_code",
    "co_consts", "co_names", "co_varnames", "co_filename", "func_globals", "func_code",
    "func_closure", "im_func", "im_self", "cell_contents",
})
BANNED_ATTRS = frozenset({
    "from_file", "tofile", "fromfile", "as_subclass", "share_memory_", "format_map", "environ",
    "getenv", "putenv", "system", "popen", "spawn", "fork", "execv", "execve", "kill", "remove",
    "unlink", "rmtree", "rename", "listdir", "scandir", "walk", "read_text", "read_bytes",
    "write_text", "write_bytes", "import_module", "exec_module", "load_module", "get_data",
    "get_type_hints", "ForwardRef", "attrgetter", "methodcaller", "getattr_static", "getmembers",
    "currentframe", "settrace", "setprofile", "modules", "Stream", "stream", "streams",
    "set_stream", "ExternalStream", "StreamContext", "Event", "graph", "graphs", "CUDAGraph",
    "make_graphed_callables", "cudart", "jiterator", "caching_allocator_alloc",
    "caching_allocator_delete", "change_current_allocator", "MemPool", "use_mem_pool",
    "CUDAPluggableAllocator", "inline_asm_elementwise", "singledispatch", "mro", "library", "ops",
    "classes", "load_inline", "cpp_extension", "add_pre_run_hook", "pre_run_hooks",
    "launch_enter_hook", "launch_exit_hook", "untyped_storage", "storage", "typed_storage",
    "knobs", "set_", "__array__", "from_dlpack", "to_dlpack", "apply_", "map_", "map2_",
    # raw addresses (INTEGRITY.md class 1): a kernel addresses only the tensors it is handed
    "data_ptr", "pointer_type", "const_pointer_type", "str_to_ty", "int_to_ptr",
    "create_int_to_ptr", "extern_elementwise",
})

# torch/triton submodules that reach native code, other streams, the compiler stack, files,
# processes or the checker. A chain that resolves into one of them is rejected.
BANNED_MODULES = (
    "torch.ops", "torch.classes", "torch.utils", "torch.library", "torch.testing",
    "torch.multiprocessing", "torch.distributed", "torch.hub", "torch.jit", "torch.package",
    "torch.serialization", "torch.fx", "torch.export", "torch.overrides", "torch.onnx",
    "torch.compiler", "torch.profiler", "torch.autograd.profiler", "torch.cuda.streams",
    "torch.cuda.graphs", "torch.cuda.jiterator", "torch.accelerator", "torch.backends",
    "torch.storage", "torch.monitor", "triton.testing", "triton.runtime", "triton.compiler",
    "triton.knobs", "triton.backends", "triton.tools", "triton.profiler", "triton.experimental",
)
# Individual torch/triton objects with the same reach, by dotted path (resolved lazily).
BANNED_OBJECTS = (
    "torch.ops", "torch.classes", "torch.from_file", "torch.compile", "torch.load", "torch.save",
    "torch.Stream", "torch.Event", "torch.cuda.Stream", "torch.cuda.Event", "torch.cuda.stream",
    "torch.cuda.set_stream", "torch.cuda.ExternalStream", "torch.cuda.StreamContext",
    "torch.cuda.cudart", "torch.cuda.caching_allocator_alloc",
    "torch.cuda.caching_allocator_delete",
    "torch.cuda.MemPool", "torch.cuda.use_mem_pool", "torch.cuda.graph", "torch.cuda.CUDAGraph",
    "torch.cuda.make_graphed_callables", "torch.UntypedStorage", "torch.TypedStorage",
    "triton.compile", "triton.language.inline_asm_elementwise", "torch.frombuffer",
    "torch.from_numpy", "torch.from_dlpack", "torch.asarray", "triton.language.pointer_type",
    "triton.language.str_to_ty",
)

# Torch functions a candidate may call freely: allocation, views and queries. Other torch calls
# are recorded as `torch_call:<name>` flags; the runtime monitor decides whether they computed.
TORCH_ALLOC = frozenset({
    "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "empty_strided", "arange", "device", "Size", "is_tensor", "is_floating_point", "finfo", "iinfo",
    "dtype", "get_default_dtype", "broadcast_shapes", "cdiv", "next_power_of_2", "jit", "autotune",
    "Config", "heuristics", "constexpr", "is_available", "current_device", "get_device_properties",
})

# The host API a candidate may touch on torch and triton (an ALLOWLIST: anything else, however
# public, is refused, since a new torch API may turn off Python dispatch, compile, or run on
# another thread). Allowed are allocation, views, metadata, dtypes and devices, the plain aten
# functions (`torch.<op>`, `torch.nn.functional`, `torch.linalg/fft/special`: each dispatches an
# aten op, which the runtime monitor sees), module and parameter classes, `autograd.Function`,
# device queries, and Triton's launch-side API. triton.language is the kernel DSL itself.
TORCH_TOP = frozenset({
    "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "layout", "memory_format", "Generator",
    "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
    "get_default_dtype", "is_tensor", "broadcast_shapes", "contiguous_format", "channels_last",
    "channels_last_3d", "preserve_format", "strided", "inf", "nan", "pi", "e", "newaxis",
    "nn", "autograd", "cuda", "linalg", "fft", "special", "version", "__version__", "typename",
    "sym_int", "sym_float", "sym_max", "sym_min", "OutOfMemoryError", "return_types",
    "manual_seed", "optim",
})
TORCH_SUB: dict[str, frozenset[str] | None] = {  # None: every public name (a plain aten op)
    "nn": frozenset({"Module", "Parameter", "ModuleList", "ModuleDict", "Sequential", "Identity",
                     "ParameterList", "ParameterDict", "functional", "init", "Buffer"}),
    "autograd": frozenset({"Function", "function"}),
    # the base class of an optimizer task's answer (KernelBench-X Adam); its steps dispatch aten ops
    "optim": frozenset({"Optimizer"}),
    "cuda": frozenset({"is_available", "current_device", "device_count", "get_device_properties",
                       "get_device_name", "get_device_capability", "synchronize", "device",
                       "is_bf16_supported", "OutOfMemoryError", "current_stream"}),
    "version": frozenset({"cuda", "hip", "__version__", "git_version"}),
    "linalg": None, "fft": None, "special": None, "Tensor": None, "return_types": None,
}
TORCH_SUB3 = {("nn", "functional"): None, ("nn", "init"): None,
              ("autograd", "function"): frozenset({"once_differentiable", "FunctionCtx"})}
TRITON_TOP = frozenset({
    "jit", "autotune", "Config", "heuristics", "cdiv", "next_power_of_2", "language", "constexpr",
    "__version__", "must_use_result", "OutOfResources", "CompilationError", "TritonError",
})


def banned_attr_name(name: str) -> str | None:
    """Why an attribute name is out of reach whatever object it is read from, or None."""
    bare = name.lstrip("_")
    if name in BANNED_ATTRS:
        return (f"reaches {name!r} (an escape: files, raw memory, other streams, compiled "
                "extensions or the runtime's hooks)")
    if bare in DANGER_MODULES or name in MODULE_ALIASES:
        return f"reaches the module attribute {name!r} (an escape to the OS or the interpreter)"
    if name in FRAME_ATTRS:
        return f"reaches the interpreter internals {name!r} (an escape through frames and code)"
    return None


@lru_cache(maxsize=None)
def _aten_functions() -> frozenset[str]:
    import torch

    return frozenset(n for n in dir(torch._C._VariableFunctions) if not n.startswith("_"))


def outside_host_api(chain: tuple[str, ...]) -> str | None:
    """Why a torch/triton chain is outside the allowlisted host API (see TORCH_TOP), or None."""
    root, rest = chain[0], chain[1:]
    if not rest:
        return None
    head = rest[0]
    if root == "triton":
        return None if head in TRITON_TOP else (
            f"uses triton.{head} (the host API allows triton.{', triton.'.join(sorted(TRITON_TOP))})")
    if root != "torch":
        return None
    import torch

    if head in _aten_functions() or isinstance(getattr(torch, head, None), torch.dtype):
        return None
    if head not in TORCH_TOP:
        return (f"uses torch.{head}, outside the host API a candidate may use (allocation, views, "
                "metadata, dtypes, devices, aten ops, torch.nn modules, autograd.Function)")
    if len(rest) < 2 or head not in TORCH_SUB:
        return None
    allow = TORCH_SUB[head]
    layer = getattr(torch.nn, rest[1], None) if head == "nn" else None
    if (isinstance(layer, type) and issubclass(layer, torch.nn.Module)
            and layer.__module__.startswith("torch.nn.modules.")):
        return None  # a layer class (KernelBench's ModelNew holds its weights in them); not
        # nn.parallel's DataParallel, which runs replicas on threads the monitor does not watch
    if allow is not None and rest[1] not in allow:
        return f"uses torch.{head}.{rest[1]} (allowed: {', '.join(sorted(allow))})"
    deeper = TORCH_SUB3.get((head, rest[1]), MISSING) if len(rest) > 2 else None
    if deeper is MISSING and head == "nn" and len(rest) > 2:
        return None  # an attribute of an allowed class (nn.Module.__init__ is a dunder, refused)
    if isinstance(deeper, frozenset) and rest[2] not in deeper:
        return f"uses torch.{'.'.join(rest[:3])} (allowed: {', '.join(sorted(deeper))})"
    return None
