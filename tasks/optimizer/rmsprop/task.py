"""One RMSprop optimizer step (optionally centered, with momentum), in place.

Implement `rmsprop(param, grad, square_avg, grad_avg, momentum_buffer, lr=1e-2, alpha=0.99,
eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False)`, which updates the state in place and
returns None. It is the math of `torch.optim.RMSprop` (maximize=False) for one step:

    g          = grad + weight_decay * param                  # only if weight_decay != 0
    square_avg = alpha * square_avg + (1 - alpha) * g * g
    if centered:
        grad_avg = alpha * grad_avg + (1 - alpha) * g
        avg      = sqrt(square_avg - grad_avg * grad_avg) + eps    # new square_avg and grad_avg
    else:
        avg      = sqrt(square_avg) + eps
    if momentum > 0:
        momentum_buffer = momentum * momentum_buffer + g / avg
        param           = param - lr * momentum_buffer
    else:
        param           = param - lr * g / avg

- State that a configuration does not use must be left exactly as it is: `grad_avg` is only
  written when `centered`, `momentum_buffer` only when `momentum > 0`.
- All five tensors are float32, contiguous, of the same (arbitrary) shape. `grad` must not be
  modified. The hyperparameters are Python numbers (`centered` a bool).

The final states of all four mutated tensors (`param`, `square_avg`, `grad_avg`,
`momentum_buffer`) are compared with the reference's using the default float32 tolerance.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Optimizer"
LEVEL = 3
MUTATES = ("param", "square_avg", "grad_avg", "momentum_buffer")


def rmsprop(param: torch.Tensor, grad: torch.Tensor, square_avg: torch.Tensor, grad_avg: torch.Tensor,
            momentum_buffer: torch.Tensor, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
            weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> None:
    """PyTorch reference, written as torch.optim.RMSprop's single-tensor path does it."""
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    if centered:
        grad_avg.lerp_(grad, 1 - alpha)
        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    else:
        avg = square_avg.sqrt()
    avg = avg.add_(eps)
    if momentum > 0:
        momentum_buffer.mul_(momentum).addcdiv_(grad, avg)
        param.add_(momentum_buffer, alpha=-lr)
    else:
        param.addcdiv_(grad, avg, value=-lr)


CASES = [
    {"name": "plain_small", "small": True, "shape": [100, 37], "hparams": {}},
    {"name": "centered_momentum_wd_small", "small": True, "shape": [4097],
     "hparams": {"lr": 1e-3, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.01, "momentum": 0.9, "centered": True}},
    {"name": "momentum_only_small", "small": True, "shape": [33, 65], "hparams": {"momentum": 0.5}},
    {"name": "size1", "small": True, "shape": [1], "hparams": {"centered": True}},
    {"name": "centered_outliers_small", "small": True, "shape": [16, 129], "outliers": True,
     "hparams": {"lr": 3e-3, "centered": True}},
    # every path through the reference's branches (tests/unit/test_task_coverage.py)
    {"name": "wd_plain_small", "small": True, "shape": [257], "hparams": {"lr": 1e-3, "weight_decay": 0.05}},
    {"name": "centered_momentum_small", "small": True, "shape": [3, 77],
     "hparams": {"alpha": 0.95, "momentum": 0.7, "centered": True}},
    {"name": "wd_momentum_small", "small": True, "shape": [129], "hparams": {"weight_decay": 0.02, "momentum": 0.9}},
    {"name": "centered_wd_small", "small": True, "shape": [5, 31],
     "hparams": {"lr": 3e-3, "weight_decay": 0.03, "centered": True}},
    {"name": "params_16M_momentum", "small": False, "shape": [4096, 4096], "hparams": {"momentum": 0.9}},
    {"name": "params_64M_plain", "small": False, "shape": [67108864], "hparams": {"lr": 1e-3}},
    {"name": "params_odd_centered_all_outliers", "small": False, "shape": [12345, 1023], "outliers": True,
     "hparams": {"lr": 1e-3, "alpha": 0.95, "weight_decay": 0.1, "momentum": 0.8, "centered": True}},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """param ~ normal; grad ~ 0.1 * normal (outliers: 0.1% scaled by 10); grad_avg ~ 0.05 * normal;
    square_avg = grad_avg ** 2 + 0.01 * uniform(0.1, 1.1) (square_avg - grad_avg ** 2 stays >= 1e-3);
    momentum_buffer ~ 0.1 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    param = torch.randn(shape, generator=g, device=g.device)
    grad = normal(g, shape, case.get("outliers"), 0.1)
    grad_avg = 0.05 * torch.randn(shape, generator=g, device=g.device)
    square_avg = grad_avg * grad_avg + 0.01 * (0.1 + torch.rand(shape, generator=g, device=g.device))
    buf = 0.1 * torch.randn(shape, generator=g, device=g.device)
    args = tuple(t.to(device) for t in (param, grad, square_avg, grad_avg, buf))
    return args, dict(case["hparams"])


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    hp = case["hparams"]
    states = 2 + int(hp.get("centered", False)) + int(hp.get("momentum", 0) > 0)  # param, square_avg, ...
    return {"flops": 12 * n, "bytes": 4 * n * (1 + 2 * states)}
