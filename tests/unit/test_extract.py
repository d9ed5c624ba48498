from kbx_ray.prompting.extract import extract, extract_code
from kbx_ray.types import Generation

CODE = "import torch\n\ndef relu(x):\n    return x\n"


def test_last_block_defining_entry_wins():
    text = f"Sketch:\n```python\ndef helper():\n    pass\n```\nFinal:\n```python\n{CODE}```\nDone."
    assert extract_code(text, "relu") == CODE


def test_later_block_without_entry_is_skipped():
    text = f"```python\n{CODE}```\nUsage:\n```python\nprint(relu(x))\n```"
    assert extract_code(text, "relu") == CODE


def test_think_block_is_ignored():
    text = f"<think>```python\ndef relu(x):\n    return 0\n```</think>\n```python\n{CODE}```"
    assert extract_code(text, "relu") == CODE


def test_unfenced_code_is_taken_from_first_import():
    assert extract_code("Here you go:\n" + CODE, "relu") == CODE


def test_no_code_block():
    cand = extract(Generation(text="I cannot do that."), "activation/relu", "relu")
    assert cand.error_kind == "no_code_block" and cand.code == ""


def test_truncated_completion():
    gen = Generation(text="```python\nimport torch\ndef relu(x):\n    y = (", finish_reason="length")
    assert extract(gen, "activation/relu", "relu").error_kind == "truncated"


def test_identical_code_gives_identical_candidate_id():
    a = extract(Generation(text=f"```python\n{CODE}```"), "t/x", "relu")
    b = extract(Generation(text=f"Sure!\n```py\n{CODE}\n```"), "t/x", "relu")
    assert a.candidate_id == b.candidate_id and not a.error_kind
