"""How a failed evaluator call is read: the candidate's own crash, its evaluator's death (one of
the candidate's `engine.retries`), or its evaluator's node leaving (queued again without counting).

The evaluator group (evaluator_group.py) settles each call by these; they are kept apart from it
because they read Ray's exceptions and the sandbox's verdicts, not the dispatch.
"""
from __future__ import annotations

from kbx_ray.types import ErrorKind, EvalResult

MOVES = 20  # node losses one candidate may ride out before they count as its tries


class EvaluatorLost(Exception):
    """The evaluator died holding the candidate: one of the candidate's `engine.retries`."""


class NodeLost(EvaluatorLost):
    """The evaluator's node left: queued again without counting (up to MOVES times)."""


def node_lost(e: BaseException | str, elastic: bool) -> bool:
    """The evaluator died with its node (terminated, preempted), not by the candidate. On a role
    cluster an evaluator that stops answering (ActorUnavailableError: the call "may or may not have
    run", before the GCS has noticed the node is gone) counts so too: the sandbox keeps candidates
    from taking their evaluator down, and what is left there is lost nodes. On one machine it is
    the candidate's try, as before."""
    if getattr(e, "preempted", False) or type(e).__name__ == "NodeDiedError":
        return True
    if elastic and type(e).__name__ == "ActorUnavailableError":
        return True
    return any(s in str(e) for s in ("its node has died", "node was terminated"))


def lost(e: BaseException | str, elastic: bool) -> EvaluatorLost:
    """What each candidate of a call whose evaluator died is told: NodeLost if the evaluator went
    with its node, else EvaluatorLost (the retry counts it)."""
    return (NodeLost if node_lost(e, elastic) else EvaluatorLost)(first_line(e))


def worker_sigkilled(res: EvalResult) -> bool:
    """The verdict is the sandbox worker's death by SIGKILL (sandbox.Sandbox._died)."""
    return res.error_kind == ErrorKind.CRASH and "killed by SIGKILL" in res.error_msg


def first_line(e: BaseException | str) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
