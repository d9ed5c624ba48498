"""Backend errors a user can act on. Each message is one line naming the cause and the fix.

They subclass ConfigError, so the CLI prints them as one line instead of a traceback: a server that is
down, a model name it does not serve or a missing weights folder are fixed in the model config.
"""
from __future__ import annotations

from kbx_ray.errors import ConfigError


class BackendError(ConfigError):
    """A model backend cannot serve requests (unreachable, unknown model, failed engine)."""
