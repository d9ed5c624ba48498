"""`kbx` subcommands as a user runs them (in a subprocess, exit codes and output)."""
import json
import subprocess
import sys

from tests.conftest import FIXTURES


def kbx(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kbx_ray.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_eval_broken_candidate_gives_error_kind_json():
    r = kbx("eval", "activation/relu", str(FIXTURES / "candidates" / "wrong_values.py"), "--json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert res["exec_ok"] is False and res["call_ok"] is True and res["error_kind"] == "mismatch"
    for key in ("error_msg", "flags", "speedup", "cases"):
        assert key in res
    assert res["cases"][0]["case"] == "fp32_small"


def test_eval_solution_passes(tmp_path):
    from kbx_ray.suites.builtin import get_task

    r = kbx("eval", "math/exp", get_task("math/exp").solution_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_tasks_json_lists_the_suite():
    r = kbx("tasks", "--json")
    rows = json.loads(r.stdout)
    assert r.returncode == 0 and len(rows) >= 15
    relu = next(x for x in rows if x["id"] == "activation/relu")
    assert relu["category"] == "Activation" and relu["signature"].startswith("relu(x: torch.Tensor)")


def test_user_errors_are_one_line():
    for args, needle in [(("tasks", "bogus=1"), "bogus"),
                         (("eval", "nope/nope", "x.py"), "unknown task 'nope/nope'"),
                         (("sweep", "--dry-run", "hardware=tpu9"), "unknown hardware pool 'tpu9'")]:
        r = kbx(*args)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_eval_candidate_files_that_cannot_be_read_as_source_are_verdicts(tmp_path):
    """Unreadable, binary, non-UTF-8, empty, huge: a JSON verdict and exit 1, never a traceback."""
    files = {"nonutf8.py": b'def relu(x):\n    return "\xff\xfe"\n',
             "binary.py": b"\x7fELF\x00\x01", "empty.py": b"", "blank.py": b"\n  \n", "huge.py": b"#" * (2 << 20)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder.py").mkdir()
    cases = {"nonutf8.py": ("syntax_error", "not valid utf-8 (byte 0xff on line 2)"),
             "binary.py": ("syntax_error", "NUL byte at offset 4"),
             "empty.py": ("no_code_block", "is empty"), "blank.py": ("no_code_block", "is empty"),
             "huge.py": ("no_code_block", "2.0 MiB, over the 1 MiB"),
             "folder.py": ("no_code_block", "not a regular file"),
             "/proc/self/mem": ("no_code_block", "cannot read /proc/self/mem")}  # reads fail: EIO
    for name, (kind, needle) in cases.items():
        r = kbx("eval", "activation/relu", str(tmp_path / name), "--json")
        assert r.returncode == 1 and "Traceback" not in r.stderr, (name, r.stderr)
        res = json.loads(r.stdout)
        assert res["exec_ok"] is False and res["error_kind"] == kind, (name, res)
        assert needle in res["error_msg"] and res["stage"] == "extract", (name, res["error_msg"])
    r = kbx("eval", "activation/relu", str(tmp_path / "nonutf8.py"))  # the table, not JSON
    assert r.returncode == 1 and "FAIL syntax_error" in r.stdout and "Traceback" not in r.stderr
    # a coding line is honoured, as Python honours it
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" +
                                        (FIXTURES / "candidates" / "wrong_values.py").read_bytes())
    r = kbx("eval", "activation/relu", str(tmp_path / "latin.py"), "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["error_kind"] == "mismatch", r.stderr


def test_an_internal_error_shows_its_traceback_and_says_it_is_a_bug(monkeypatch, capsys):
    """Our own KeyError is not passed off as the user's mistake in one line."""
    from kbx_ray.cli import commands as cli
    from kbx_ray.suites import builtin as suite

    def broken(*a, **k):
        return {}["no such internal key"]

    monkeypatch.setattr(suite, "load_suite", broken)
    assert cli.main(["tasks"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'no such internal key'" in err
    assert err.strip().splitlines()[-1].startswith("kbx: internal error: this is a bug in kbx_ray")
    # the user's own unknown pool (a KeyError subclass) is still one line
    monkeypatch.undo()
    assert cli.main(["sweep", "--dry-run", "hardware=tpu9"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().startswith("kbx: error: unknown hardware pool")


def test_sweep_help_shows_overrides_presets_and_the_most_used_keys():
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "sweep.py"
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for needle in ("overrides (key=value", "GROUP=NAME", "most used keys:", "suite.include=",
                   "sweep.samples=", "model.options.path=", "sink.wandb.mode=", "force_resume=true",
                   "presets (GROUP=NAME", "--dry-run"):
        assert needle in out, needle
    presets: dict[str, list[str]] = {}
    for ln in out.split("presets (GROUP=NAME")[1].splitlines()[1:]:  # wrapped lines continue
        group, _, names = ln.strip().rpartition("=") if "=" in ln else ("", "", ln)
        key = group.split()[-1] if group else list(presets)[-1]
        presets.setdefault(key, []).extend(names.split())
    assert {"one_shot", "repair"} <= set(presets["method"]) and "tiny" in presets["model"]
    assert "repair_ablation" in presets["sweep"] and "h100" in presets["hardware"]


def test_every_subcommand_has_a_full_help_page():
    """What it does, its exit codes and examples, for each subcommand; overrides are optional."""
    for cmd in ("sweep", "eval", "tasks", "report"):
        r = kbx(cmd, "--help", timeout=60)
        assert r.returncode == 0, r.stderr
        description = r.stdout.split("\n\n")[1]
        assert len(description.split()) >= 12, (cmd, description)
        for needle in ("exit codes:", "\n  0    ", "\n  2    ", "\n  130  ", "\n  141  ",
                       "examples:", f"{cmd} "):
            assert needle in r.stdout, (cmd, needle)
    r = kbx("eval", "activation/relu", timeout=60)  # one argument that is no folder or JSONL
    assert r.returncode == 2 and "required" not in r.stderr and "kbx eval --help" in r.stderr


def test_eval_extracts_a_raw_llm_answer_and_names_near_task_ids(tmp_path):
    """A pasted answer (prose, a sketch block, then the kernel) is judged as a sweep judges the
    completion; a typo in the task id gets a did-you-mean; -q leaves stderr to warnings and
    errors; outside a terminal no log line is wrapped."""
    from kbx_ray.suites.builtin import get_task

    code = open(get_task("activation/relu").solution_path).read()
    answer = tmp_path / "answer.md"
    answer.write_text("Sure! First the idea:\n\n```python\nout = x.clamp(min=0)\n```\n\nAnd the "
                      f"Triton version:\n\n```python\n{code}```\n\nThis launches one program per "
                      "block of 1024 elements.\n")
    r = kbx("-q", "eval", "activation/relu", str(answer))
    assert r.returncode == 0 and "activation/relu: PASS" in r.stdout, r.stdout + r.stderr
    assert r.stderr == ""
    r = kbx("eval", "activation/relu", str(answer), "--json")  # logs on: one line each
    assert r.returncode == 0 and json.loads(r.stdout)["exec_ok"] is True
    (line,) = [ln for ln in r.stderr.splitlines() if "sandbox worker confinement" in ln]
    assert "no_new_privs" in line, r.stderr
    prose = tmp_path / "prose.md"
    prose.write_text("I could not write this kernel, sorry.\n```\n$ nvidia-smi\n```\n")
    r = kbx("eval", "activation/relu", str(prose))
    assert r.returncode == 1 and "FAIL no_code_block (stage extract, call_ok=False)" in r.stdout
    assert " on )" not in r.stdout and " s on" not in r.stdout.splitlines()[0]
    r = kbx("eval", "activaton/relu", str(answer))
    assert r.returncode == 2 and r.stderr.strip() == (
        "kbx: error: unknown task 'activaton/relu' (did you mean 'activation/relu' or "
        "'activation/elu'?): run `kbx tasks` to list ids (a pattern may be an id, a category folder or a glob)")


def test_eval_judges_a_folder_and_a_jsonl_in_one_process_with_a_table(tmp_path):
    from kbx_ray.suites.builtin import get_task

    good = open(get_task("activation/relu").solution_path).read()
    wrong = (FIXTURES / "candidates" / "wrong_values.py").read_text()
    folder = tmp_path / "kernels" / "activation"
    folder.mkdir(parents=True)
    (folder / "relu.py").write_text(good)
    (folder / "relu__wrong.py").write_text(wrong)
    r = kbx("eval", str(tmp_path / "kernels"))
    assert r.returncode == 1, r.stdout + r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "activation/relu" in ln]
    assert len(rows) == 2 and sum("pass" in ln for ln in rows) == 1
    assert sum("mismatch" in ln for ln in rows) == 1 and "1 of 2 correct" in r.stdout
    assert r.stderr.count("sandbox worker confinement") == 1  # one evaluator, one worker
    jsonl = tmp_path / "completions.jsonl"
    jsonl.write_text("".join(json.dumps({"task_id": "activation/relu", "sample": i, "round": 0,
                                         "completion": f"Here:\n```python\n{c}```\n"}) + "\n"
                             for i, c in enumerate([good, good])))
    r = kbx("eval", str(jsonl), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    results = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [x["sample"] for x in results] == [0, 1] and all(x["exec_ok"] for x in results)


def test_a_closed_stdout_ends_quietly():
    """`kbx tasks --json | head -c 10`: no traceback, no bug line; exit 0 when the answer fitted
    in the pipe before the reader left, else 141 as `cat` would. A reader gone before the first
    write (`| true`, which exits while Python still starts) is the 141 case."""
    for reader, codes in (("head -c 10", ("0", "141")), ("true", ("141",))):
        r = subprocess.run(["bash", "-c", f"{sys.executable} -m kbx_ray.cli tasks --json | "
                            f"{reader}; s=${{PIPESTATUS[0]}}; echo; echo rc=$s"], capture_output=True,
                           text=True, timeout=120)
        assert r.stdout.splitlines()[-1] in [f"rc={c}" for c in codes], (reader, r.stdout)
        assert r.stderr == "", (reader, r.stderr)
