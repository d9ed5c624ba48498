"""Extraction on the shapes real completions take: reasoning blocks, split blocks, bare code,
trailing prose, truncation."""
from __future__ import annotations

import ast

import pytest

from kbx_ray.prompting.extract import extract, extract_code, split_think
from kbx_ray.types import Generation

KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
          "def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
          "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
          "    tl.store(y_ptr + offs, tl.maximum(x, 0), mask=offs < n)\n")
WRAPPER = ("def relu(x: torch.Tensor) -> torch.Tensor:\n    y = torch.empty_like(x)\n"
           "    _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
           "    return y\n")
MODULE = KERNEL + "\n\n" + WRAPPER


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```"


def test_closing_think_tag_without_opening_one():
    # The chat template opened <think> in the prompt: only the closing tag is in the completion.
    text = f"Let me try {fenced('def relu(x):  return 0')}\n</think>\nAnswer:\n{fenced(MODULE)}"
    answer, thoughts, unclosed = split_think(text)
    assert "return 0" in thoughts and "return 0" not in answer and not unclosed
    assert extract_code(text, "relu") == MODULE


def test_several_think_blocks_are_all_dropped():
    text = (f"<think>a {fenced('def relu(x): return 1')}</think>{fenced(MODULE)}"
            f"<THINK>check {fenced('def relu(x): return 2')}</THINK>\nDone.")
    assert extract_code(text, "relu") == MODULE


def test_unclosed_think_falls_back_to_code_inside_it():
    text = f"<think>I will write it.\n{fenced(MODULE)}\nThat should work"
    assert split_think(text)[2] is True
    assert extract_code(text, "relu") == MODULE


def test_unclosed_think_at_token_limit_is_truncated():
    gen = Generation(text=f"<think>plan...\n{fenced(MODULE)}\nnow check", finish_reason="length")
    assert extract(gen, "activation/relu", "relu").error_kind == "truncated"


def test_kernel_and_wrapper_in_separate_blocks_are_joined():
    text = f"The kernel:\n{fenced(KERNEL)}\nThe wrapper:\n{fenced(WRAPPER)}\nUsage:\n{fenced('relu(x)')}"
    code = extract_code(text, "relu")
    assert code is not None and "@triton.jit" in code and code.rstrip().endswith("return y")
    assert code.index("_relu_kernel(") < code.index("def relu(")
    ast.parse(code)


def test_complete_last_block_is_not_merged_with_a_draft():
    draft = KERNEL.replace("tl.maximum(x, 0)", "x") + "\n\n" + WRAPPER
    code = extract_code(f"{fenced(draft)}\nFixed:\n{fenced(MODULE)}", "relu")
    assert code == MODULE


@pytest.mark.parametrize("lang", ["Python", "py3", "python3", ""])
def test_language_tags(lang):
    assert extract_code(fenced(MODULE, lang), "relu") == MODULE


def test_non_python_block_defining_the_name_is_ignored():
    text = fenced("def relu(x):\n    return x\n", "cpp") + "\nno python here"
    assert extract(Generation(text=text), "t/relu", "relu").error_kind == "no_code_block"


def test_unfenced_code_with_trailing_prose_is_trimmed():
    text = "Here is my solution.\n\n" + MODULE + "\nThis kernel launches one program per block.\n" \
           "It is memory bound.\n"
    code = extract_code(text, "relu")
    assert code == MODULE


def test_unfenced_code_starting_at_the_decorator():
    body = KERNEL.split("\n\n\n", 1)[1] + "\n\n" + WRAPPER  # no imports at all
    assert extract_code("Sure:\n" + body, "relu") == body


def test_entry_bound_by_assignment():
    code = KERNEL + "\n\ndef _impl(x):\n    return x\n\n\nrelu = _impl\n"
    assert extract_code(fenced(code), "relu") == code


def test_unclosed_fence_at_token_limit_is_truncated():
    gen = Generation(text="Sure.\n" + "```python\n" + MODULE, finish_reason="length")
    cand = extract(gen, "activation/relu", "relu")
    assert cand.error_kind == "truncated" and "max_tokens" in cand.error_msg


def test_length_after_a_complete_block_keeps_the_code():
    gen = Generation(text=fenced(MODULE) + "\nExplanation: the kernel loads x and", finish_reason="length")
    cand = extract(gen, "activation/relu", "relu")
    assert cand.error_kind == "" and cand.code == MODULE


def test_other_servers_length_reasons_count_as_truncation():
    gen = Generation(text="```python\nimport torch\ndef relu(x):\n    return (", finish_reason="max_tokens")
    assert extract(gen, "activation/relu", "relu").error_kind == "truncated"


def test_gibberish_is_no_code_block():
    gen = Generation(text="the of ( ) [ tl tl x = = relu ``` a", finish_reason="stop")
    assert extract(gen, "activation/relu", "relu").error_kind == "no_code_block"


def test_a_usage_snippet_cut_at_the_token_limit_leaves_the_finished_module():
    text = f"{fenced(MODULE)}\nUsage:\n```python\nx = torch.randn(1024)\nprint(relu(x"
    c = extract(Generation(text=text, finish_reason="length"), "activation/relu", "relu")
    assert c.error_kind == "" and c.code == MODULE
    # the answer itself cut short is still truncated
    cut = extract(Generation(text=fenced(MODULE)[:-40], finish_reason="length"),
                  "activation/relu", "relu")
    assert cut.error_kind == "truncated"


def test_a_fence_under_a_list_item_is_dedented():
    indented = "".join(f"   {ln}\n" if ln else "\n" for ln in MODULE.splitlines())
    text = f"1. The kernel:\n   ```python\n{indented}   ```\n2. Done."
    code = extract_code(text, "relu")
    assert code == MODULE and ast.parse(code)


def test_a_usage_block_that_rebinds_the_entry_is_not_the_answer():
    kernel = MODULE.replace("relu", "mean")
    usage = "x = torch.randn(4096, device='cuda')\nmean = mean(x)\nprint(mean == mean)\n"
    assert extract_code(f"{fenced(kernel)}\nTry it:\n{fenced(usage)}", "mean") == kernel
    # an alias of another callable still names the entry when no block defines it
    alias = KERNEL + "\n\ndef _impl(x):\n    return x\n\n\nrelu = _impl\n"
    assert extract_code(fenced(alias), "relu") == alias
