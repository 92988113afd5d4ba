"""How a backend's status names map to Legion's phases, and back. Pure.

Each project may give a table in its config (`[statuses]`, backend name = Legion status);
names it does not give are matched against Legion's own names and the usual aliases (Linear's
"In Review", GitHub Projects' "In progress" ...). A backend status that maps to nothing is not
Legion's to act on (Canceled, Duplicate): reads skip such issues, and `legion doctor` lists the
names so the user can map them if they meant to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from legion.core.model import Status, fold_name
from legion.errors import ConfigError, InputError

# Where Legion itself moves issues: the decision table's transitions and the finisher's Done.
MOVED_TO = (Status.TODO, Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.RETRO, Status.DONE)


@dataclass(frozen=True)
class StatusMap:
    """Backend status name -> Legion status, by the config's table first, then by name."""

    table: Mapping[str, Status] = field(default_factory=dict)  # backend name: Legion status

    def to_legion(self, name: str) -> Status | None:
        """The Legion status of backend status `name`, or None when it maps to none."""
        folded = fold_name(name)
        for backend_name, status in self.table.items():
            if fold_name(backend_name) == folded:
                return status
        try:
            return Status.parse(name)
        except InputError:
            return None

    def to_backend(self, status: Status, names: Iterable[str]) -> str:
        """The backend status (one of `names`, the ones the backend has) for `status`.

        A name the table maps to `status` wins over a name that is `status` by alias; among
        several, the first the backend lists. No name at all is a configuration error that
        says how to fix it."""
        available = list(names)
        by_table = [n for n in available if self._table_status(n) is status]
        if by_table:
            return by_table[0]
        by_name = [
            n for n in available if self._table_status(n) is None and self.to_legion(n) is status
        ]
        if by_name:
            return by_name[0]
        raise ConfigError(
            f"no status of the tracker maps to {status.value!r} (it has: "
            f"{', '.join(available) or 'none'}): add one, or map one in the [statuses] table "
            f'of .legion/config.toml, e.g. "{available[0] if available else "Name"}" = '
            f'"{status.value}"'
        )

    def unmapped(self, names: Iterable[str]) -> list[str]:
        """The backend's statuses that map to no Legion status."""
        return [n for n in names if self.to_legion(n) is None]

    def missing(self, names: Iterable[str]) -> list[Status]:
        """The statuses Legion moves issues to itself that no backend status maps to (Triage,
        Icebox and Backlog are a person's to use: a tracker without them is fine)."""
        mapped = {self.to_legion(n) for n in names}
        return [s for s in MOVED_TO if s not in mapped]

    def _table_status(self, name: str) -> Status | None:
        folded = fold_name(name)
        for backend_name, status in self.table.items():
            if fold_name(backend_name) == folded:
                return status
        return None


def parse_status_table(value: object) -> dict[str, Status]:
    """The `[statuses]` config table: backend status name = Legion status name."""
    if not isinstance(value, Mapping):
        raise ValueError(f'must be a table of "backend status" = "Legion status", got {value!r}')
    table: dict[str, Status] = {}
    for name, target in value.items():
        if not isinstance(name, str) or not name.strip() or not isinstance(target, str):
            raise ValueError(f"entry {name!r} = {target!r} must map a name to a status name")
        try:
            table[name.strip()] = Status.parse(target)
        except InputError as exc:
            raise ValueError(f"entry {name!r}: {exc}") from None
    return table
