"""Each failure mode ends as a record with the right error_kind, and the warm worker recovers."""
from pathlib import Path

import pytest

from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate

RELU = get_task("activation/relu")
GOOD = Path(RELU.solution_path).read_text()


@pytest.mark.parametrize("fixture, kind, stage", [
    ("raises.py", "runtime_error", "compile"),
    ("system_exit.py", "runtime_error", "compile"),
    ("import_error.py", "import_error", "compile"),
    ("segfault.py", "runtime_error", "compile"),  # the interpreter bounds check stops the wild read
    ("wrong_values.py", "mismatch", "correctness"),
    # default deny: the torch op raises inside the first call, which is the compile stage
    ("torch_compute.py", "disqualified", "compile"),
])
def test_failure_mode_then_recovery(cpu_evaluator, fixture, kind, stage):
    code = (FIXTURES / "candidates" / fixture).read_text()
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    assert (res.exec_ok, res.error_kind, res.stage) == (False, kind, stage), res.error_msg
    assert res.error_msg
    # The next candidate is judged by a working worker, whatever the last one did to it.
    ok = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert ok.exec_ok, ok.error_msg


def test_hang_is_killed_at_the_timeout_then_recovery(fast_timeout_evaluator):
    code = (FIXTURES / "candidates" / "hang.py").read_text()
    res = fast_timeout_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    assert (res.exec_ok, res.error_kind, res.stage) == (False, "timeout", "compile"), res.error_msg
    fast_timeout_evaluator.cfg.case_timeout_s = 180  # the recovery run may be slow on a busy box
    ok = fast_timeout_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert ok.exec_ok, ok.error_msg


def test_syntax_error_never_reaches_the_worker(cpu_evaluator):
    spawns = cpu_evaluator.sandbox.spawns
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", "def relu(x:\n"))
    assert (res.error_kind, res.stage, res.call_ok) == ("syntax_error", "static", False)
    assert cpu_evaluator.sandbox.spawns == spawns


def test_error_messages_show_candidate_frames_only(cpu_evaluator):
    code = (FIXTURES / "candidates" / "raises.py").read_text()
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    assert "the candidate gave up" in res.error_msg
    assert "kbx_ray/evaluate" not in res.error_msg


def test_mismatch_message_names_case_and_errors(cpu_evaluator):
    code = (FIXTURES / "candidates" / "wrong_values.py").read_text()
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    assert "case fp32_small" in res.error_msg and "max abs err" in res.error_msg
    assert res.cases[-1].max_abs_err > 0.001


def test_worker_steps_are_profiled_per_result(cpu_evaluator):
    """The worker's own account of where a candidate's time went reaches `stage_s` (w_*): its
    calls, input draws and output encoding, bounded by the parent's own clock of the requests."""
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert res.exec_ok, res.error_msg
    st = res.stage_s
    assert st["w_call"] > 0 and st["w_inputs"] > 0 and st["w_encode"] > 0
    assert st["w_call"] + st["w_inputs"] + st["w_encode"] <= st["worker_run"]
    assert "lock_wait" not in st  # no GPU: no lock to wait for


def test_a_dead_judging_worker_is_never_replaced_mid_evaluation():
    """The judging worker's ops need the process its `load` went to: one that died between
    requests is a crash naming its cause, never a fresh worker without the candidate (which
    failed an honest kernel as `infra_error`); one this process stopped is `infra_error` (retried). Between evaluations `hello` and
    `load` start a fresh one, and the replay process (stateless) restarts as before."""
    import os
    import signal

    from kbx_ray.evaluate.parent.sandbox import Sandbox, WorkerDied
    from kbx_ray.evaluate.settings import SandboxConfig

    judge, replay = Sandbox(SandboxConfig(), stateful=True), Sandbox(SandboxConfig())
    try:
        path = judge.write_code("kbx_cand_good", GOOD)
        loaded, _ = judge.request({"op": "load", "code_path": path, "task_path": RELU.path,
                                   "entry": RELU.name, "module": "good",
                                   "task_key": RELU.task_hash}, 120)
        assert loaded["ok"], loaded
        replay.start()
        for box in (judge, replay):
            os.kill(box.proc.pid, signal.SIGKILL)
            box.proc.wait()
        with pytest.raises(WorkerDied) as died:
            judge.request({"op": "run"}, 30)
        assert died.value.kind == "crash" and "killed by SIGKILL" in died.value.msg
        assert "before the run request" in died.value.msg and judge.spawns == 1
        with pytest.raises(WorkerDied, match="stopped the worker before the trace request") as stop:
            judge.request({"op": "trace"}, 30)  # _died killed it: still no fresh worker
        assert stop.value.kind == "infra_error"  # the parent's doing, never the candidate's
        assert judge.spawns == 1 and judge.proc is None
        reply, _ = judge.request({"op": "hello"}, 60)  # a fresh worker for the next candidate
        assert reply["ok"] and judge.spawns == 2
        reply, _ = replay.request({"op": "hello"}, 60)
        assert reply["ok"] and replay.spawns == 2
    finally:
        judge.kill()
        replay.kill()


def test_a_candidate_that_prints_a_lot_keeps_its_worker():
    """Its log passes half of `sandbox.file_mb` over the evaluation, never in one request: the log
    is trimmed between requests (the worker appends to it), not the worker killed, which judged
    the rest of the evaluation on a fresh worker without the candidate."""
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    from kbx_ray.evaluate.settings import SandboxConfig

    code = GOOD + '''

_quiet = relu


def relu(x):
    print("." * 400_000)
    return _quiet(x)
'''
    ev = Evaluator(EvalConfig(device="cpu", unseen_cases=0, sandbox=SandboxConfig(file_mb=2)))
    try:
        res = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
        assert res.exec_ok, f"{res.error_kind}: {res.error_msg}"
        assert ev.sandbox.spawns == 1 and sum(c.seeds for c in res.cases) >= 6
    finally:
        ev.close()


@pytest.mark.parametrize("landlock", ["auto", "off"])
@pytest.mark.parametrize("printed", [400_000, 0], ids=["trim", "tail"])
def test_a_log_replaced_by_a_link_never_reaches_a_parent_file(static_off, tmp_path, landlock,
                                                               printed):
    """Attack: the candidate replaces its worker.log with a link to a file of the parent's, then
    prints past the trim threshold (the trim would empty the file) or not (the crash's log tail
    would quote it), and crashes. The parent sizes, trims and reads the log only through the
    descriptor it opened: the file keeps its bytes and none reach the verdict's text."""
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    from kbx_ray.evaluate.settings import SandboxConfig
    target = tmp_path / "parent_file.txt"
    # 1.4 MB, past a 2 MB cap's half (the trim), or 1.4 KB (the tail)
    target.write_text("PARENT-SECRET\n" * (100_000 if printed else 100))
    before = target.read_bytes()
    code = f'''import os
try:
    os.remove("worker.log")
    os.symlink({str(target)!r}, "worker.log")
except OSError:
    pass
''' + GOOD + '''

_quiet = relu


def relu(x):
    print("." * PRINTED)
    os._exit(3)
'''.replace("PRINTED", str(printed))
    ev = Evaluator(EvalConfig(device="cpu", unseen_cases=0, monitor="off",
                              sandbox=SandboxConfig(file_mb=2, landlock=landlock)))
    try:
        res = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    finally:
        ev.close()
    assert (res.exec_ok, res.error_kind) == (False, "crash"), res.error_msg
    assert "PARENT-SECRET" not in res.error_msg
    assert target.read_bytes() == before


@pytest.mark.parametrize("plant", ["file", "link"])
def test_what_a_candidate_leaves_at_the_task_copys_name_is_never_used(static_off, tmp_path,
                                                                      plant):
    """Attack: a candidate leaves, at the name the parent will copy another task's file to in its
    warm worker's temp dir (a hash of that public file), a module of its own (the next load would
    import it and draw that task's inputs with it) or a link to a path of the parent's (the copy
    would be written there). The parent writes the copy afresh for every load and renames it over
    the name: the next, honest candidate passes on the same worker, and nothing is written
    outside it."""
    import hashlib
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    outside = tmp_path / "written_by_the_parent.py"
    gelu = get_task("activation/gelu")
    name = f"kbx_task_{hashlib.sha256(Path(gelu.path).read_bytes()).hexdigest()[:16]}.py"
    planter = f'''import os
if {plant!r} == "link":
    os.symlink({str(outside)!r}, {name!r})
else:
    with open({name!r}, "w") as f:
        f.write("def make_inputs(case, seed, device):\\n    raise RuntimeError('planted')\\n")
''' + GOOD
    ev = Evaluator(EvalConfig(device="cpu", unseen_cases=0, monitor="off"))
    try:
        first = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", planter))
        assert first.exec_ok, f"{first.error_kind}: {first.error_msg}"
        honest = ev.evaluate(gelu, make_candidate(gelu.task_id, gelu.name,
                                                  Path(gelu.solution_path).read_text()))
        assert honest.exec_ok, f"{honest.error_kind}: {honest.error_msg}"
        assert ev.sandbox.spawns == 1  # the same warm worker
    finally:
        ev.close()
    assert not outside.exists()


def test_a_worker_its_candidate_kills_between_requests_is_its_crash(static_off):
    """Attack on the stateful worker: a thread the candidate starts at import ends the process
    a moment after `load` answered (between requests or in the next one, as the parent's pace
    falls). The verdict is the candidate's `crash` with its exit code, never an `infra_error`
    retried on a fresh worker (a second run it could tell apart)."""
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator

    code = '''import os, threading, time
threading.Thread(target=lambda: (time.sleep(0.5), os._exit(7)), daemon=True).start()
''' + GOOD + '''

_fast = relu


def relu(x):
    time.sleep(1.0)
    return _fast(x)
'''
    ev = Evaluator(EvalConfig(device="cpu", unseen_cases=0, monitor="off"))
    try:
        res = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    finally:
        ev.close()
    assert (res.exec_ok, res.error_kind) == (False, "crash"), res.error_msg
    assert "exit code 7" in res.error_msg and "retried_infra_error" not in res.flags
    assert ev.sandbox.spawns == 1
