"""What the GitHub Issues tracker knows of its repository, cached between runs: its id, its
labels (the `status: <name>` ones hold the status when no project does), the Projects (v2)
board whose Status field holds it otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STATUS_PREFIX = "status:"
_CACHE_VERSION = 1


def status_label(name: str) -> str:
    """The label that says an issue has the status `name`."""
    return f"status: {name}"


def status_of_label(label: str) -> str | None:
    """The status a `status: <name>` label names, or None for any other label."""
    if not label.casefold().startswith(STATUS_PREFIX):
        return None
    name = label[len(STATUS_PREFIX) :].strip()
    return name or None


@dataclass(frozen=True)
class ProjectBoard:
    """The Projects (v2) board that holds the status: its Status field and the options."""

    id: str
    number: int
    title: str
    closed: bool
    field_id: str
    options: tuple[tuple[str, str], ...]  # (option id, name), in the field's order

    def option_names(self) -> list[str]:
        return [name for _, name in self.options]

    def option_id(self, name: str) -> str:
        return next(option_id for option_id, option in self.options if option == name)


@dataclass
class RepositoryInfo:
    """What the tracker needs to know of the repository, cached between runs."""

    slug: str  # OWNER/NAME as configured
    id: str
    name_with_owner: str
    viewer: str
    has_issues: bool
    permission: str | None
    labels: dict[str, str]  # name: id
    project_number: int | None
    project: ProjectBoard | None
    fetched_at: float

    def find_label(self, name: str) -> tuple[str, str] | None:
        """(name as GitHub has it, id) of the label `name`, in any case."""
        if name in self.labels:
            return name, self.labels[name]
        folded = name.casefold()
        for existing, label_id in self.labels.items():
            if existing.casefold() == folded:
                return existing, label_id
        return None

    def status_label_names(self) -> list[str]:
        """The statuses the repository's `status:` labels name."""
        return [s for label in self.labels if (s := status_of_label(label)) is not None]

    def to_json(self) -> dict[str, Any]:
        data = {key: value for key, value in vars(self).items() if key != "project"}
        project = None
        if self.project is not None:
            project = {**vars(self.project), "options": [list(o) for o in self.project.options]}
        return {"version": _CACHE_VERSION, **data, "project": project}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RepositoryInfo:
        if data.get("version") != _CACHE_VERSION:
            raise ValueError("another version")
        raw = data.get("project")
        project = None
        if raw is not None:
            options = tuple((str(i), str(n)) for i, n in raw["options"])
            project = ProjectBoard(**{**raw, "options": options})
        number = data["project_number"]
        return cls(
            slug=str(data["slug"]),
            id=str(data["id"]),
            name_with_owner=str(data["name_with_owner"]),
            viewer=str(data["viewer"]),
            has_issues=bool(data["has_issues"]),
            permission=data["permission"],
            labels={str(k): str(v) for k, v in data["labels"].items()},
            project_number=None if number is None else int(number),
            project=project,
            fetched_at=float(data["fetched_at"]),
        )
