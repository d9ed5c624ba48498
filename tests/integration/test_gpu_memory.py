"""GPU memory admission between real processes (gpu_memory.MemoryLedger): a reservation held by
another process makes a second one wait until it is released, `others_hold` sees it, and a dead
holder's reservation does not count."""
import multiprocessing as mp
import os
import time

import pytest

from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger, budget_bytes, estimate_bytes

pytestmark = pytest.mark.slow  # starts ledger holders in other processes


def _hold(root, nbytes, hold_s, ready, key="gpu0"):
    led = MemoryLedger(key, 1000, root)
    with led.reserve(nbytes):
        ready.set()
        time.sleep(hold_s)


def test_second_reservation_waits_for_the_first(tmp_path):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold, args=(str(tmp_path), 700, 1.0, ready))
    p.start()
    assert ready.wait(30)
    led = MemoryLedger("gpu0", 1000, str(tmp_path))
    assert led.others_hold()
    t0 = time.perf_counter()
    with led.reserve(600):
        waited = time.perf_counter() - t0
        assert not led.others_hold()
    p.join(10)
    assert waited > 0.3, waited
    with led.reserve(300):  # fits beside nothing: no wait
        pass


def test_small_reservations_share_and_dead_holders_do_not_count(tmp_path):
    led = MemoryLedger("gpu1", 1000, str(tmp_path))
    (led.dir / "999999.0").write_text("900")  # a pid that is not running
    t0 = time.perf_counter()
    with led.reserve(500):
        with led.reserve(400):
            pass
    assert time.perf_counter() - t0 < 1.0
    assert not (led.dir / "999999.0").exists()


def test_estimates():
    assert budget_bytes(141 << 30) == 137 << 30
    assert estimate_bytes(64 << 20, 256 << 20) > 3 * (64 << 20) + (256 << 20)


def _stand(root, nbytes, ready, release, key="gpu3"):
    """Another evaluator, idle: its contexts' standing hold and nothing else."""
    led = MemoryLedger(key, 1000, root)
    led.standing(nbytes)
    ready.set()
    release.wait(60)


def test_standing_holds_count_against_the_budget_but_are_no_evaluation(tmp_path):
    """An evaluator's CUDA contexts stand in the ledger for its life (idle ones held 612-952 MiB
    each on an H100, 17 GiB in all that no reservation counted, and the device ran out with the
    ledger in bounds). They fill the budget like any hold; but beside them alone an evaluation
    runs, shares nothing (an OOM there is its own) and the OOM retry alone does not wait."""
    import threading

    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_stand, args=(str(tmp_path), 600, ready, release))
    p.start()
    assert ready.wait(30)
    led = MemoryLedger("gpu3", 1000, str(tmp_path))
    mine = led.standing(100)
    assert not led.others_hold()
    t0 = time.perf_counter()
    with led.reserve(300, alone=True):  # the retry alone: standing holds do not stop it
        assert not led.shared_since_admission()
    with led.reserve(500):  # over the budget beside standing holds only: no evaluation runs
        assert not led.shared_since_admission()
        admitted = threading.Event()

        def second():
            with led.reserve(50):  # 600 + 100 + 500 + 50 > 1000 beside a running evaluation
                admitted.set()

        t = threading.Thread(target=second)
        t.start()
        assert not admitted.wait(0.5)
    assert admitted.wait(5)  # in once the running one left
    t.join(5)
    assert time.perf_counter() - t0 < 5
    led.unstand(mine)
    assert not any(k.startswith(f"{os.getpid()}.") for k in led.holdings())
    release.set()
    p.join(10)
    assert not led.holdings()  # a dead process's standing hold goes like any other


def test_an_alone_claim_stops_new_admissions_until_it_has_run(tmp_path):
    """The OOM retry's turnstile: once it has claimed the device, a reservation that would fit
    beside the current holders waits for it, so a stream of small ones cannot starve it."""
    import threading

    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold, args=(str(tmp_path), 300, 1.0, ready))
    p.start()
    assert ready.wait(30)
    led = MemoryLedger("gpu0", 1000, str(tmp_path))
    order = []

    def alone():
        with led.reserve(10, alone=True):
            assert not led.others_hold()
            order.append("alone")

    t = threading.Thread(target=alone)
    t.start()
    while not any(k.endswith(".alone") for k in led.holdings()):
        time.sleep(0.01)
    with led.reserve(100):  # 300 + 100 fit the budget, but the claim came first
        order.append("small")
    t.join(10)
    p.join(10)
    assert order == ["alone", "small"]


def test_shared_since_admission_sees_one_that_came_and_went(tmp_path):
    ctx = mp.get_context("spawn")
    led = MemoryLedger("gpu0", 1000, str(tmp_path))
    with led.reserve(100):
        assert not led.shared_since_admission()
        ready = ctx.Event()
        p = ctx.Process(target=_hold, args=(str(tmp_path), 100, 0.1, ready))
        p.start()
        assert ready.wait(30)
        assert led.shared_since_admission()  # it holds now
        p.join(10)
        assert not led.others_hold()
        assert led.shared_since_admission()  # gone, but it ran beside this one
    with led.reserve(100):
        assert not led.shared_since_admission()


def test_an_evaluation_reserves_every_timing_and_fresh_input_set(tmp_path):
    """The worker's `time` holds each timing and fresh input set at once (an H100 decode-attention
    case ran out of memory drawing them): more sets, a larger reservation, by one case each."""
    import types

    from kbx_ray.evaluate.parent.admission import REPLAY_SETS, Admission
    from kbx_ray.evaluate.settings import EvalConfig

    task = types.SimpleNamespace(cost=lambda case: {"bytes": case["n"]}, footprint=lambda case: case["n"])
    led = MemoryLedger("gpu2", 1 << 40, str(tmp_path))
    cases = [{"n": 100 << 20}, {"n": 300 << 20}]
    few = Admission(EvalConfig(device="cpu", timing_sets=1, fresh_sets=0), led).estimate(task, cases)
    many = Admission(EvalConfig(device="cpu", timing_sets=4, fresh_sets=3), led).estimate(task, cases)
    assert many - few == int(6 * (300 << 20) * 1.25)  # 6 more sets of the largest case, + margin
    # the replay process holds its own fresh inputs and program buffers: REPLAY_SETS more
    off = Admission(EvalConfig(device="cpu", timing_sets=1, fresh_sets=0, replay="off"),
                    led).estimate(task, cases)
    flush = EvalConfig().timing.flush_mb << 20  # its flush buffer and its context too
    assert few - off == int((REPLAY_SETS * (300 << 20) + flush) * 1.25)
    # the contexts are not in it: they stand apart, gpu_ctx_mb per process, for the evaluator's life
    adm = Admission(EvalConfig(device="cpu", gpu_ctx_mb=700), led)
    adm.stand(3)
    assert [n for _, n in led.holdings().values()] == [3 * (700 << 20)]
    adm.close()
    assert not led.holdings()


def test_beside_others_a_reservation_waits_for_memory_really_free(tmp_path):
    """Memory no ledger counts (contexts, caches) can leave the device short with the ledger in
    bounds: beside another holder, a reservation waits until the device reports that much free;
    once no one else holds any, it runs whatever the device reports."""
    free = [100]
    led = MemoryLedger("gpu2", 1000, str(tmp_path), free=lambda: free[0])
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold, args=(str(tmp_path), 300, 1.5, ready, "gpu2"))
    p.start()
    assert ready.wait(30)
    import threading

    admitted = threading.Event()

    def want():
        with led.reserve(400):  # the ledger has room (300 + 400 <= 1000), the device does not
            admitted.set()

    t = threading.Thread(target=want)
    t0 = time.perf_counter()
    t.start()
    assert not admitted.wait(0.5)
    free[0] = 500  # the device now has it free: admitted beside the holder
    assert admitted.wait(5)
    assert time.perf_counter() - t0 < 1.4  # before the holder left
    t.join(5)
    # that wait was the device's, not the ledger's (stage_s mem_wait_free)
    assert 0.4 < led.free_wait_s <= led.wait_s
    p.join(10)
    free[0] = 0
    with led.reserve(400):  # no other holder: the device's word does not stop it
        pass


def test_one_that_fits_only_alone_beside_standing_holds_claims_the_device(tmp_path):
    """Beside the evaluators' standing contexts, an evaluation that fits only alone would wait
    for a moment when none runs, which a stream of small ones need never leave: it claims the
    device like the OOM retry, so a later small one waits behind it."""
    import threading

    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold, args=(str(tmp_path), 100, 1.0, ready, "gpu4"))
    p.start()
    assert ready.wait(30)
    led = MemoryLedger("gpu4", 1000, str(tmp_path))
    mine = led.standing(500)
    order = []

    def big():
        with led.reserve(600):  # 500 standing + 600 > 1000: only alone
            assert not led.others_hold()
            order.append("big")

    t = threading.Thread(target=big)
    t.start()
    t0 = time.perf_counter()
    while not any(k.endswith(".alone") for k in led.holdings()):
        assert time.perf_counter() - t0 < 5, "no claim: it waits beside the stream"
        time.sleep(0.01)
    with led.reserve(100):  # 500 + 100 + 100 fit, but the claim came first
        order.append("small")
    t.join(10)
    p.join(10)
    led.unstand(mine)
    assert order == ["big", "small"]
