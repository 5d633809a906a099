"""One rule for the C-level Python bindings (cuda.bindings, hip-python): status first.

Every call returns `(status, *values)` (or the status alone); `checked` raises unless the
status is success, naming the call and the status, and hands back the values.
"""
from __future__ import annotations


def checked(result, what: str):
    """The values of a binding call's result, or a RuntimeError naming `what` and its status."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"{what} failed: {getattr(status, 'name', status)!s}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values
