"""One Lion optimizer step (sign of an interpolated momentum), in place.

Implement `lion(param, grad, exp_avg, lr=1e-4, beta1=0.9, beta2=0.99, weight_decay=0.0)`, which
updates `param` and `exp_avg` in place and returns None (Chen et al., 2023, "Symbolic Discovery of
Optimization Algorithms"):

    c        = beta1 * exp_avg + (1 - beta1) * grad          # uses the OLD exp_avg
    param    = param * (1 - lr * weight_decay) - lr * sign(c)
    exp_avg  = beta2 * exp_avg + (1 - beta2) * grad

- sign(c) is -1, 0 or +1; sign(0) = 0, so an element with c == 0 only decays. The inputs contain
  such elements (grad and exp_avg both exactly 0). Elsewhere |c| is never within 1e-6 of zero,
  so the sign cannot depend on the rounding of c.
- `param`, `grad` and `exp_avg` are float32, contiguous, of the same (arbitrary) shape. `grad`
  must not be modified. The hyperparameters are Python floats.

The final states of both mutated tensors (`param`, `exp_avg`) are compared with the reference's
using the default float32 tolerance.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Optimizer"
LEVEL = 2
MUTATES = ("param", "exp_avg")


def lion(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, lr: float = 1e-4, beta1: float = 0.9,
         beta2: float = 0.99, weight_decay: float = 0.0) -> None:
    """PyTorch reference."""
    update = (exp_avg * beta1 + grad * (1 - beta1)).sign_()
    param.mul_(1 - lr * weight_decay).add_(update, alpha=-lr)
    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


CASES = [
    {"name": "small", "small": True, "shape": [100, 37], "hparams": {}},
    {"name": "decay_small", "small": True, "shape": [4097],
     "hparams": {"lr": 3e-4, "beta1": 0.95, "beta2": 0.98, "weight_decay": 0.1}},
    {"name": "size1", "small": True, "shape": [1], "hparams": {"lr": 1e-3}},
    {"name": "outliers_small", "small": True, "shape": [16, 129], "outliers": True,
     "hparams": {"lr": 1e-3, "weight_decay": 1.0}},
    {"name": "params_16M", "small": False, "shape": [4096, 4096], "hparams": {"weight_decay": 0.1}},
    {"name": "params_64M", "small": False, "shape": [67108864], "hparams": {"lr": 3e-4, "beta1": 0.95}},
    {"name": "params_odd_outliers", "small": False, "shape": [12345, 1023], "outliers": True,
     "hparams": {"lr": 1e-3, "beta2": 0.999, "weight_decay": 0.5}},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """param ~ normal; grad ~ 0.1 * normal (outliers: 0.1% scaled by 10); exp_avg ~ 0.05 * normal.
    0.5% of the elements get grad = exp_avg = 0 exactly (sign 0). Elsewhere, where the
    interpolation c (computed in float32, within 1e-8 of exact) is within 1e-5 of zero, grad is
    moved by +0.01, keeping c well away from 0."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    hp = case["hparams"]
    beta1 = hp.get("beta1", 0.9)
    param = torch.randn(shape, generator=g, device=g.device)
    grad = normal(g, shape, case.get("outliers"), 0.1)
    exp_avg = 0.05 * torch.randn(shape, generator=g, device=g.device)
    c = beta1 * exp_avg + (1 - beta1) * grad
    grad = torch.where(c.abs() < 1e-5, grad + 0.01, grad)
    zero = torch.rand(shape, generator=g, device=g.device) < 0.005
    grad = torch.where(zero, 0.0, grad)
    exp_avg = torch.where(zero, 0.0, exp_avg)
    args = tuple(t.to(device) for t in (param, grad, exp_avg))
    return args, dict(hp)


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 8 * n, "bytes": 4 * 5 * n}
