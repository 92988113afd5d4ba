"""What each answer the model proxy (`legion.proxy.server`) forwarded leaves behind: its usage
in the ledger (recorded as unread, never as zero, when it should have reported some and did
not), and the session's question kept (the answer asked one) or forgotten (asked again).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .ledger import Spender, UsageLedger
from .metering import UsageMeter
from .questions import AskedQuestions

if TYPE_CHECKING:
    from legion.store import Store

logger = logging.getLogger(__name__)


def main_loop(request: dict[str, Any]) -> bool:
    """Whether a request is a session's own turn (it offers tools), not a side request of its
    CLI (a title, a probe: no tools), which says nothing of its question."""
    return bool(request.get("tools"))


def forget_question(db: Store, session_id: str) -> None:
    try:
        AskedQuestions(db).forget(session_id)
    except Exception as exc:  # never fails the session
        logger.warning("model question not forgotten: %s", exc, extra={"session": session_id})


def keep_question(db: Store, spender: Spender, meter: UsageMeter) -> None:
    """The session's question, if the response asked one (`legion.proxy.questions`)."""
    calls = meter.calls()
    if not calls or not spender.session_id:
        return
    try:
        AskedQuestions(db).record(spender.session_id, calls[-1])
    except Exception as exc:  # never fails the session: its transcript says it in the end
        logger.warning("model question not kept: %s", exc, extra=whose(spender))


def record_usage(
    ledger: UsageLedger, spender: Spender, meter: UsageMeter, reports: bool, path: str
) -> None:
    """What a response used, in the ledger; one that should have reported usage (`reports`)
    and did not is recorded as unread (never as zero tokens), and said in the daemon's log."""
    used = meter.result()
    if used is None and not reports:
        return  # an error, a free request: nothing was used
    try:
        if used is not None:
            ledger.record(spender, used)
            return
        ledger.record_unread(spender)
    except Exception as exc:  # a ledger that cannot be written never fails the session
        logger.warning("model usage not recorded: %s", exc, extra=whose(spender))
    who = spender.issue or spender.mode or "a session"
    logger.warning(
        "model usage unread: %s's answer from %s reported no usage the proxy can read "
        "(recorded as unread: no budget counts it)",
        who,
        path,
        extra=whose(spender),
    )


def whose(spender: Spender) -> dict[str, str]:
    """A log line's issue and session: the spender's."""
    return {"issue": spender.issue, "session": spender.session_id}
