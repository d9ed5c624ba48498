"""Model backends behind one protocol (see base.py)."""
from kbx_ray.llm.base import Backend, GenParams, build_backend

__all__ = ["Backend", "GenParams", "build_backend"]
