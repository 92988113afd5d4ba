"""Legion's identifiers for one repository's issues: `KEY-N` is issue #N, KEY being the
project's `issue_key` (WIDGETS-12 is issue #12 of acme/widgets). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from legion.core.model import parse_identifier
from legion.errors import InputError, NotFoundError


@dataclass(frozen=True)
class IssueKeys:
    """KEY-N for issue #N of the repository `slug`, both ways."""

    key: str  # the project's issue_key, upper case
    slug: str  # OWNER/NAME

    def number(self, identifier: str) -> tuple[str, int]:
        """(KEY-N, N) for an identifier of this project."""
        key, number = parse_identifier(identifier)
        if key != self.key:
            raise NotFoundError(
                f"{key}-{number} is not an issue of this project: its issues are "
                f"{self.key}-N, for issue #N of {self.slug}"
            )
        return f"{key}-{number}", number

    def identifier(self, number: int) -> str:
        return f"{self.key}-{number}"

    def of(self, node: Mapping[str, Any]) -> str:
        """The identifier of an issue's node."""
        return self.identifier(int(node["number"]))

    def blocker_number(self, identifier: str, blocked: str) -> int:
        """The number of a blocker of `blocked`; one of another project is bad input."""
        try:
            return self.number(identifier)[1]
        except NotFoundError as exc:
            raise InputError(f"{exc} (a blocker of {blocked})") from None

    def not_found(self, identifier: str) -> NotFoundError:
        return NotFoundError(f"no issue {identifier} in {self.slug} (see `legion issue list`)")
