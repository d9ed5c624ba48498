"""One AdamW optimizer step (decoupled weight decay), in place.

Implement `adamw(param, grad, exp_avg, exp_avg_sq, step=1, lr=1e-3, beta1=0.9, beta2=0.999,
eps=1e-8, weight_decay=1e-2)`, which updates `param`, `exp_avg` and `exp_avg_sq` in place and
returns None. It is the math of `torch.optim.AdamW` (amsgrad=False, maximize=False) for one step,
where `step` is the number of this step (1 for the first update):

    param      = param * (1 - lr * weight_decay)        # decoupled decay, applied first
    exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    denom      = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps
    param      = param - (lr / bias_correction1) * exp_avg / denom

- Unlike Adam's L2 penalty, the weight decay does not enter the gradient or the moments.
- All four tensors are float32, contiguous, of the same (arbitrary) shape. `grad` must not be
  modified. The hyperparameters are Python numbers. The new `exp_avg` and `exp_avg_sq` (not the
  old ones) enter the parameter update.

The final states of all three mutated tensors (`param`, `exp_avg`, `exp_avg_sq`) are compared
with the reference's using the default float32 tolerance.
"""
import math

import torch

from kbx_ray.taskkit import normal

CATEGORY = "Optimizer"
LEVEL = 3
MUTATES = ("param", "exp_avg", "exp_avg_sq")


def adamw(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
          step: int = 1, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-2) -> None:
    """PyTorch reference, written as torch.optim.AdamW's single-tensor path does it."""
    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


CASES = [
    {"name": "first_step_small", "small": True, "shape": [100, 37], "hparams": {}},
    {"name": "step10_small", "small": True, "shape": [4097],
     "hparams": {"step": 10, "lr": 1e-2, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1}},
    {"name": "size1", "small": True, "shape": [1], "hparams": {"step": 3, "lr": 1e-2}},
    {"name": "no_decay_outliers_small", "small": True, "shape": [16, 129], "outliers": True,
     "hparams": {"step": 1000, "lr": 3e-3, "weight_decay": 0.0}},
    {"name": "params_16M", "small": False, "shape": [4096, 4096], "hparams": {"step": 100}},
    {"name": "params_64M_wd", "small": False, "shape": [67108864],
     "hparams": {"step": 7, "lr": 1e-2, "weight_decay": 0.1}},
    {"name": "params_odd_outliers", "small": False, "shape": [12345, 1023], "outliers": True,
     "hparams": {"step": 2, "lr": 3e-3, "beta2": 0.95, "weight_decay": 0.05}},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """param ~ normal; grad ~ 0.1 * normal (outliers: 0.1% scaled by 10); exp_avg ~ 0.05 * normal;
    exp_avg_sq ~ 0.01 * uniform (positive, so the running state is non-trivial)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    param = torch.randn(shape, generator=g, device=g.device)
    grad = normal(g, shape, case.get("outliers"), 0.1)
    exp_avg = 0.05 * torch.randn(shape, generator=g, device=g.device)
    exp_avg_sq = 0.01 * torch.rand(shape, generator=g, device=g.device)
    args = tuple(t.to(device) for t in (param, grad, exp_avg, exp_avg_sq))
    return args, dict(case["hparams"])


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 16 * n, "bytes": 4 * 7 * n}
