"""Roofline arithmetic and the dtype that bounds a case."""
import torch

from kbx_ray.evaluate.parent.roofline import compute_dtype, roofline


def test_roofline_fractions():
    gbps, tflops, sol = roofline({"bytes": 4_800_000_000, "flops": 0}, 1000.0, 4800.0, 989.0)
    assert abs(gbps - 4.8) < 1e-9 and tflops == 0 and abs(sol - 0.001) < 1e-12
    _, tf, sol = roofline({"bytes": 1, "flops": 10**12}, 1.0, 4800.0, 1000.0)
    assert abs(tf - 1000.0) < 1e-9 and abs(sol - 1.0) < 1e-9


def test_no_peaks_means_no_sol():
    assert roofline({"bytes": 10, "flops": 10}, 1.0, 0.0, 0.0)[2] is None


def test_compute_dtype_follows_inputs():
    i8 = torch.zeros(2, dtype=torch.int8)
    assert compute_dtype(((i8, torch.zeros(2)), {})) == "int8"
    assert compute_dtype(((torch.zeros(2, dtype=torch.float16),), {})) == "float16"
    assert compute_dtype(((3, torch.zeros(2)), {})) == "tf32"  # fp32 may use tensor cores
    assert compute_dtype(((3,), {"n": 4})) == "float32"
