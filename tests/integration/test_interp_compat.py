"""interp_compat against torch: the patched Triton interpreter computes bf16 as real bf16 (bit for
bit with torch's own bf16 ops on ties, NaN, inf, denormals and overflow), maps libdevice to correct
math, runs autotune's first config with its hooks, and files what it cannot run as
NotImplementedError. The kernels run in a child process, as in the worker: TRITON_INTERPRET must be
set before triton is imported, and the patches must not leak into this test process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow  # starts each test runs in a child process

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice
from kbx_ray.evaluate.worker import interp_compat
interp_compat.install()

@triton.jit
def _binary(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    res = (a + b, a - b, a * b, a / b, tl.maximum(a, b), tl.minimum(a, b), -a,
           tl.where(a > b, a, b), tl.maximum(a, 0.0), a * 3.0)
    for i in tl.static_range(10):
        tl.store(out_ptr + i * n + offs, res[i], mask=m)

@triton.jit
def _convert(x_ptr, i_ptr, h_ptr, bf_ptr, ibf_ptr, hbf_ptr, bfi_ptr, bfh_ptr, rz_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(bf_ptr + offs, x.to(tl.bfloat16), mask=m)
    tl.store(rz_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz"), mask=m)
    tl.store(ibf_ptr + offs, tl.load(i_ptr + offs, mask=m).to(tl.bfloat16), mask=m)
    tl.store(hbf_ptr + offs, tl.load(h_ptr + offs, mask=m).to(tl.bfloat16), mask=m)
    b = x.to(tl.bfloat16)
    tl.store(bfi_ptr + offs, b.to(tl.int32), mask=m)
    tl.store(bfh_ptr + offs, b.to(tl.float16), mask=m)

@triton.jit
def _reduce_dot(x_ptr, y_ptr, s_ptr, mx_ptr, am_ptr, cs_ptr, d_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    y = tl.load(y_ptr + r[:, None] * N + r[None, :])
    tl.store(s_ptr + r, tl.sum(x, axis=1))
    tl.store(mx_ptr + r, tl.max(x, axis=1))
    tl.store(am_ptr + r, tl.argmax(x, axis=1))
    tl.store(cs_ptr + r[:, None] * N + r[None, :], tl.cumsum(x, axis=1))
    tl.store(d_ptr + r[:, None] * N + r[None, :], tl.dot(x, y))

@triton.jit
def _libm(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    res = (libdevice.erf(x), libdevice.erfc(x), libdevice.tanh(x), libdevice.exp2(x),
           libdevice.rsqrt(tl.abs(x) + 1.0), libdevice.log1p(tl.abs(x)), libdevice.expm1(x),
           libdevice.pow(tl.abs(x), y), libdevice.atan2(x, y), libdevice.fma(x, y, x),
           cuda_libdevice.lgamma(tl.abs(x) + 0.5), libdevice.erfinv(x / 4.0))
    for i in tl.static_range(12):
        tl.store(out_ptr + i * n + offs, res[i], mask=m)

@triton.jit
def _bessel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, libdevice.j0(tl.load(x_ptr + offs)))

hooks = []

@triton.autotune(configs=[triton.Config({"BLOCK": 32}, pre_hook=lambda a: hooks.append("cfg")),
                          triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                 key=["n"], post_hook=lambda a, exception: hooks.append("post"))
@triton.jit
def _tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

data = torch.load(sys.argv[1])
a, b = data["a"], data["b"]
n = a.numel()
out = torch.empty(10, n, dtype=torch.bfloat16)
_binary[(1,)](a, b, out, n, BLOCK=triton.next_power_of_2(n))
x, i32, h = data["x"], data["i32"], data["h"]
m = x.numel()
conv = {k: torch.empty(m, dtype=d) for k, d in (("bf", torch.bfloat16), ("ibf", torch.bfloat16),
        ("hbf", torch.bfloat16), ("bfi", torch.int32), ("bfh", torch.float16), ("rz", torch.bfloat16))}
_convert[(1,)](x, i32, h, conv["bf"], conv["ibf"], conv["hbf"], conv["bfi"], conv["bfh"], conv["rz"],
               m, BLOCK=triton.next_power_of_2(m))
N = 16
rx, ry = data["rx"], data["ry"]
red = {"s": torch.empty(N, dtype=torch.bfloat16), "mx": torch.empty(N, dtype=torch.bfloat16),
       "am": torch.empty(N, dtype=torch.int32), "cs": torch.empty(N, N, dtype=torch.bfloat16),
       "d": torch.empty(N, N, dtype=torch.float32)}
_reduce_dot[(1,)](rx, ry, red["s"], red["mx"], red["am"], red["cs"], red["d"], N=N)
lx, ly = data["lx"], data["ly"]
lib = torch.empty(12, lx.numel())
_libm[(1,)](lx, ly, lib, lx.numel(), BLOCK=triton.next_power_of_2(lx.numel()))
try:
    _bessel[(1,)](torch.ones(16), torch.empty(16), BLOCK=16)
    unsupported = "ran"
except NotImplementedError as e:
    unsupported = "NotImplementedError: " + str(e)
except Exception as e:
    unsupported = type(e).__name__ + ": " + str(e)
tx = torch.randn(1000)
ty = torch.empty(1000)
_tuned[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](tx, ty, 1000)
torch.save({"out": out, "conv": conv, "red": red, "lib": lib, "unsupported": unsupported,
            "tuned": [ty, tx, hooks, _tuned.best_config.kwargs]}, sys.argv[2])
'''

SPECIAL = [0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, -1.00390625, 2.0 ** -133, -(2.0 ** -133),
           2.0 ** -126, 1e-39, -3e-40, 3.3895313892515355e38, 3.4028234663852886e38, float("inf"),
           float("-inf"), float("nan"), 65504.0, 0.1, 1.0 / 3.0, 255.5, 256.5, -7.0]


def _fp32_specials() -> torch.Tensor:
    """Ties (1 + 2^-8 and 1 + 3*2^-8 sit between two bf16 values), the exact halfway points and
    their neighbours as raw fp32 bit patterns, denormals, overflow to inf, NaN."""
    bits = torch.tensor([0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7F8000, 0x7F7F7FFF,
                         0x00008000, 0x00018000, 0x00007FFF, 0x80008000, 0x7FC00001, 0xFF800001,
                         0x7F800001], dtype=torch.int64).to(torch.int32)
    return torch.cat([torch.tensor(SPECIAL), bits.view(torch.float32), torch.randn(200) * 50])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("interp")
    g = torch.Generator().manual_seed(7)
    sp = torch.tensor(SPECIAL).to(torch.bfloat16)
    a = torch.cat([sp.repeat_interleave(len(SPECIAL)), torch.randn(300, generator=g).bfloat16()])
    b = torch.cat([sp.repeat(len(SPECIAL)), torch.randn(300, generator=g).bfloat16()])
    x = _fp32_specials()
    inputs = {"a": a, "b": b, "x": x,
              "i32": torch.randint(-(1 << 24), 1 << 24, (x.numel(),), generator=g, dtype=torch.int32),
              "h": (torch.randn(x.numel(), generator=g) * 100).half(),
              "rx": (torch.randn(16, 16, generator=g) * 4).bfloat16(),
              "ry": torch.randn(16, 16, generator=g).bfloat16(),
              "lx": torch.cat([torch.linspace(-3.9, 3.9, 101), torch.tensor([0.0, 1e-6, -1e-30])]),
              "ly": torch.cat([torch.linspace(0.5, 2.5, 101), torch.tensor([1.0, 2.0, 3.0])])}
    torch.save(inputs, d / "in.pt")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(d / "in.pt"), str(d / "out.pt")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return inputs, torch.load(d / "out.pt")


def _bits_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    """Same bf16 bit patterns; NaN only needs to be NaN (its payload is the hardware's choice)."""
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    g, w = got[~nan].view(torch.int16), want[~nan].view(torch.int16)
    bad = (g != w).nonzero()
    assert bad.numel() == 0, f"{bad.numel()} lanes differ, first {got[~nan][bad[0]]} vs {want[~nan][bad[0]]}"


def test_bf16_arithmetic_matches_torch_bit_for_bit(results):
    inp, out = results
    a, b, got = inp["a"], inp["b"], out["out"]
    want = [a + b, a - b, a * b, a / b, torch.fmax(a, b), torch.fmin(a, b), -a,
            torch.where(a > b, a, b), torch.fmax(a, torch.zeros_like(a)), a * 3.0]
    for i, w in enumerate(want):
        _bits_equal(got[i], w)


def test_bf16_conversions_round_to_nearest_even(results):
    inp, out = results
    c, x = out["conv"], inp["x"]
    _bits_equal(c["bf"], x.to(torch.bfloat16))
    _bits_equal(c["ibf"], inp["i32"].to(torch.bfloat16))
    _bits_equal(c["hbf"], inp["h"].to(torch.bfloat16))
    finite = x.to(torch.bfloat16).isfinite() & (x.abs() < 2e9)
    assert torch.equal(c["bfi"][finite], x.to(torch.bfloat16)[finite].to(torch.int32))
    torch.testing.assert_close(c["bfh"], x.to(torch.bfloat16).to(torch.float16), rtol=0, atol=0,
                               equal_nan=True)
    # round toward zero: the top 16 bits of the fp32 pattern
    xi = x.view(torch.int32)
    keep = ~x.isnan()
    assert torch.equal(c["rz"].view(torch.int16)[keep], (xi >> 16).to(torch.int16)[keep])
    # the ties: 1 + 2^-8 goes down to 1 (even), 1 + 3*2^-8 goes up to 1 + 2^-6
    assert c["bf"][4].item() == 1.0 and c["bf"][5].item() == 1.015625


def test_bf16_reductions_scans_and_dot(results):
    inp, out = results
    x, y, r = inp["rx"], inp["ry"], out["red"]
    assert torch.equal(r["mx"], x.max(dim=1).values)
    assert torch.equal(r["am"], x.float().argmax(dim=1).to(torch.int32))
    assert torch.equal(r["s"], x.float().sum(dim=1).to(torch.bfloat16))
    torch.testing.assert_close(r["cs"], x.float().cumsum(dim=1).bfloat16(), rtol=8e-3, atol=1e-2)
    torch.testing.assert_close(r["d"], x.float() @ y.float(), rtol=1e-5, atol=1e-5)


def test_libdevice_matches_torch(results):
    inp, out = results
    x, y, got = inp["lx"].double(), inp["ly"].double(), out["lib"]
    want = [torch.erf(x), torch.erfc(x), torch.tanh(x), torch.exp2(x), torch.rsqrt(x.abs() + 1),
            torch.log1p(x.abs()), torch.expm1(x), torch.pow(x.abs(), y), torch.atan2(x, y),
            x * y + x, torch.lgamma(x.abs() + 0.5), torch.erfinv(x / 4)]
    for i, w in enumerate(want):
        torch.testing.assert_close(got[i], w.float(), rtol=2e-6, atol=1e-7, msg=f"function {i}")


def test_unmapped_libdevice_function_is_not_implemented_with_a_reason(results):
    msg = results[1]["unsupported"]
    assert msg.startswith("NotImplementedError") and "__nv_j0f" in msg and "GPU" in msg, msg


def test_autotune_runs_first_config_once_with_its_hooks(results):
    y, x, hooks, best = results[1]["tuned"]
    assert torch.equal(y, x * 2)
    assert best == {"BLOCK": 32}
    assert hooks == ["cfg", "post", "cfg"]  # the one benchmark call, then the real launch


def test_to_tf32_rounds_to_ten_mantissa_bits_nearest_even():
    import numpy as np

    from kbx_ray.evaluate.worker.interp_bf16 import to_tf32

    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)
    x = np.array([1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2 ** -20, np.inf, -np.inf],
                 np.float32)
    got = to_tf32(x)
    assert got[0] == one                 # a tie rounds to even (down)
    assert got[1] == 1 + 2 * ulp         # a tie rounds to even (up)
    assert got[2] == 1 + ulp             # above the tie: up
    assert np.isinf(got[3]) and np.isinf(got[4])
    assert np.isnan(to_tf32(np.array([np.nan], np.float32)))[0]


TF32_SCRIPT = r'''
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from kbx_ray.evaluate.worker import interp_bf16, interp_compat
interp_compat.install()

@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, B: tl.constexpr, P: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    if P == 0:
        c = tl.dot(a, b)
    elif P == 1:
        c = tl.dot(a, b, input_precision="tf32")
    elif P == 2:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b, allow_tf32=False)
    tl.store(c_ptr + r[:, None] * B + r[None, :], c)

g = torch.Generator().manual_seed(0)
a, b = torch.randn(32, 32, generator=g), torch.randn(32, 32, generator=g)
exact = a.double() @ b.double()
rt = lambda t: torch.from_numpy(interp_bf16.to_tf32(t.numpy())).double()
tf = rt(a) @ rt(b)
for p in range(4):
    c = torch.empty(32, 32)
    _dot[(1,)](a, b, c, B=32, P=p)
    err = (c.double() - exact).abs().max().item()
    tf_err = (c.double() - tf).abs().max().item()
    print(p, err > 1e-3, tf_err < 1e-4)
'''


def test_fp32_dot_is_tf32_by_default_and_when_asked_exact_for_ieee():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_F32_DEFAULT", None)
    out = subprocess.run([sys.executable, "-c", TF32_SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")[:4]
    assert lines == ["0 True True", "1 True True", "2 False False", "3 False False"], out.stdout
