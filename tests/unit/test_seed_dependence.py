"""seed_dependence.seed_dependence: two outputs of a random task under different seeds must look like
independent draws, position by position (continuous values, and discrete ones such as masks)."""
import torch

from kbx_ray.evaluate.parent.seed_dependence import seed_dependence


def test_independent_draws_pass_in_every_dtype_and_for_discrete_values():
    for s in range(40):
        g = torch.Generator().manual_seed(s)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            a = torch.rand(4097, generator=g).to(dtype)
            b = torch.rand(4097, generator=g).to(dtype)
            assert seed_dependence(a, b) == "", (s, dtype)
        mask_a = (torch.rand(5000, generator=g) < 0.5).float()
        mask_b = (torch.rand(5000, generator=g) < 0.5).float()
        assert seed_dependence(mask_a, mask_b) == ""  # ~50% equal by chance alone


def test_an_output_that_ignores_its_seed_at_most_positions_fails():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(4097, generator=g)
    b = a.clone()
    b[0] = 0.5  # one element follows the seed: not identical, still dependent
    why = seed_dependence(a, b)
    assert "same value under two seeds" in why
    half = a.clone()
    half[: 2048] = torch.rand(2048, generator=g)  # half the positions ignore the seed
    assert seed_dependence(a, half)
    mask = (torch.rand(5000, generator=g) < 0.5).float()
    mask2 = mask.clone()
    mask2[:500] = 1 - mask2[:500]  # a dropout mask that is 90% the same under two seeds
    assert seed_dependence(mask, mask2)


def test_a_stream_nudged_by_the_seed_fails_though_no_value_repeats():
    g = torch.Generator().manual_seed(1)
    a = torch.rand(4097, generator=g, dtype=torch.float64)
    b = (a + 1e-3) % 1.0  # every position differs, the values move together
    assert not bool((a == b).any())
    assert "correlated position by position" in seed_dependence(a, b)


def test_tiny_outputs_are_left_to_the_all_equal_check():
    assert seed_dependence(torch.zeros(8), torch.zeros(8)) == ""
