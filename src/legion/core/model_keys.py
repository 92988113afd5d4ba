"""Which model keys a session's environment keeps: pure, names in and names out."""

from __future__ import annotations

from collections.abc import Iterable


def withheld_keys(every: Iterable[str], own: Iterable[str], *, proxied: bool) -> frozenset[str]:
    """The model key variables taken out of a session's environment: of `every` one Legion
    knows (each CLI's, each provider's), all but those its own CLI reads for the provider it
    uses (`own`), and those too when the daemon's proxy holds that key (`proxied`: the session
    gets its capability in their place). A key a session holds, its commands can read
    (`/proc/$PPID/environ`)."""
    known = frozenset(every)
    return known if proxied else known - frozenset(own)
