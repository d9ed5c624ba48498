"""The errors a user can act on, shared by every layer; a leaf module (standard library only).

They live here, not beside the code that raises them most, so that a backend, a suite format or a
settings module can raise them without importing config/compose.py (which imports the settings
modules): nothing in kbx_ray/ imports back into this file. Each message is one line that names the
setting and the fix; the CLI prints it instead of a traceback.
"""
from __future__ import annotations

import difflib
from typing import Collection


class ConfigError(ValueError):
    """A config problem the user can fix; the message is one line."""


class SuiteError(ValueError):
    """A task is malformed, or a selection names no task."""


def did_you_mean(word: str, known: Collection[str], n: int = 3) -> str:
    """' (did you mean x, y?)' for the known names close to `word`, else ''."""
    near = difflib.get_close_matches(word, list(known), n=n)
    return f" (did you mean {', '.join(near)}?)" if near else ""
