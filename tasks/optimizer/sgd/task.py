"""One SGD optimizer step with momentum, dampening, weight decay and optional Nesterov, in place.

Implement `sgd(param, grad, momentum_buffer, lr=1e-2, momentum=0.9, dampening=0.0,
weight_decay=0.0, nesterov=False, first_step=False)`, which updates `param` and
`momentum_buffer` in place and returns None. It is the math of `torch.optim.SGD`
(maximize=False) for one step:

    g = grad + weight_decay * param                         # only if weight_decay != 0
    if momentum != 0:
        if first_step:                                     # PyTorch's buffer does not exist yet:
            momentum_buffer = g                            #   it starts as a copy of g
        else:
            momentum_buffer = momentum * momentum_buffer + (1 - dampening) * g
        d = g + momentum * momentum_buffer if nesterov else momentum_buffer
    else:
        d = g                                              # momentum_buffer is left untouched
    param = param - lr * d

- On the first step the old contents of momentum_buffer are ignored (they may be anything) and
  dampening does not apply. With momentum == 0 the buffer must stay exactly as it is.
- All three tensors are float32, contiguous, of the same (arbitrary) shape. `grad` must not be
  modified. The hyperparameters are Python numbers (`nesterov` and `first_step` bools).

The final states of both mutated tensors (`param`, `momentum_buffer`) are compared with the
reference's using the default float32 tolerance.
"""
import torch

CATEGORY = "Optimizer"
LEVEL = 2
MUTATES = ("param", "momentum_buffer")


def sgd(param: torch.Tensor, grad: torch.Tensor, momentum_buffer: torch.Tensor, lr: float = 1e-2,
        momentum: float = 0.9, dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        first_step: bool = False) -> None:
    """PyTorch reference, written as torch.optim.SGD's single-tensor path does it."""
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    if momentum != 0:
        if first_step:
            momentum_buffer.copy_(grad)
        else:
            momentum_buffer.mul_(momentum).add_(grad, alpha=1 - dampening)
        if nesterov:
            grad = grad.add(momentum_buffer, alpha=momentum)
        else:
            grad = momentum_buffer
    param.add_(grad, alpha=-lr)


CASES = [
    {"name": "momentum_small", "small": True, "shape": [100, 37], "hparams": {}},
    {"name": "nesterov_wd_small", "small": True, "shape": [4097],
     "hparams": {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4, "nesterov": True}},
    {"name": "first_step_dampening_small", "small": True, "shape": [33, 65],
     "hparams": {"momentum": 0.8, "dampening": 0.5, "first_step": True, "weight_decay": 0.01}},
    {"name": "plain_no_momentum_small", "small": True, "shape": [1000], "hparams": {"momentum": 0.0, "lr": 0.5}},
    {"name": "size1", "small": True, "shape": [1], "hparams": {"nesterov": True}},
    {"name": "dampening_outliers_small", "small": True, "shape": [16, 129], "outliers": True,
     "hparams": {"momentum": 0.99, "dampening": 0.1}},
    # every path through the reference's branches (tests/unit/test_task_coverage.py)
    {"name": "wd_no_momentum_small", "small": True, "shape": [515],
     "hparams": {"momentum": 0.0, "lr": 0.3, "weight_decay": 0.05}},
    {"name": "wd_momentum_plain_small", "small": True, "shape": [7, 73],
     "hparams": {"lr": 0.1, "dampening": 0.2, "weight_decay": 0.05}},
    {"name": "first_step_small", "small": True, "shape": [300], "hparams": {"lr": 0.05, "first_step": True}},
    {"name": "first_step_nesterov_small", "small": True, "shape": [2, 3, 41],
     "hparams": {"momentum": 0.5, "nesterov": True, "first_step": True}},
    {"name": "first_step_nesterov_wd_small", "small": True, "shape": [130],
     "hparams": {"lr": 0.1, "dampening": 0.3, "weight_decay": 0.1, "nesterov": True, "first_step": True}},
    {"name": "params_16M_nesterov", "small": False, "shape": [4096, 4096],
     "hparams": {"lr": 0.1, "nesterov": True, "weight_decay": 5e-4}},
    {"name": "params_64M", "small": False, "shape": [67108864], "hparams": {"momentum": 0.9, "dampening": 0.1}},
    {"name": "params_odd_first_step_outliers", "small": False, "shape": [12345, 1023], "outliers": True,
     "hparams": {"first_step": True, "nesterov": True, "weight_decay": 1e-3}},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """param ~ normal; grad ~ 0.1 * normal (outliers: 0.1% scaled by 10); momentum_buffer ~ 0.1 *
    normal (garbage on a first step)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    param = torch.randn(shape, generator=g, device=g.device)
    grad = 0.1 * torch.randn(shape, generator=g, device=g.device)
    if case.get("outliers"):
        grad = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, grad * 10, grad)
    buf = 0.1 * torch.randn(shape, generator=g, device=g.device)
    args = tuple(t.to(device) for t in (param, grad, buf))
    return args, dict(case["hparams"])


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    has_buf = case["hparams"].get("momentum", 0.9) != 0
    reads_buf = has_buf and not case["hparams"].get("first_step", False)  # first step: written only
    return {"flops": 6 * n, "bytes": 4 * n * (3 + int(has_buf) + int(reads_buf))}
