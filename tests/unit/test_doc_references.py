"""Every test the docs name as proof (`tests/…/test_x.py::test_name`, as in
docs/failure-model.md) exists: a renamed or moved test must take its references along. So does
every test file they name alone, and every parameter id they name (`test_x[merge_after_git]`).
And what the docs say the kill campaign runs is what it runs."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.support.campaign import CAMPAIGN, QUICK, QUICK_CHAIN

ROOT = Path(__file__).resolve().parents[2]
FAILURE_MODEL = ROOT / "docs" / "failure-model.md"
REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)(?:\[([^\]\s`]+)\])?")
FILE_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)`")
NUMBERS = {4: "four", 7: "seven", 11: "eleven"}


@functools.cache
def _tests_in(path: Path) -> set[str]:
    """The test functions of `path` (`test_…`, at any depth: a class's too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def _missing(text: str, where: str) -> tuple[int, list[str]]:
    """How many tests `text` names, and those that do not exist (`where`: the doc's name)."""
    missing = []
    found = 0
    for match in REFERENCE.finditer(text):
        found += 1
        path, name, case = ROOT / match.group(1), match.group(2), match.group(3)
        if not path.exists() or name not in _tests_in(path):
            missing.append(f"{where}: {match.group(0)}")
        elif case is not None and not _has_case(path, case):
            missing.append(f"{where}: {match.group(0)} (no such parameter)")
    for match in FILE_REFERENCE.finditer(text):
        if not (ROOT / match.group(1)).is_file():
            missing.append(f"{where}: {match.group(1)}")
    return found, missing


def _has_case(path: Path, case: str) -> bool:
    """Whether `case` can be one of `path`'s parameter ids: a string in it, or one of the kill
    campaign's points (its parameters come from tests/support/campaign.py)."""
    return f'"{case}"' in path.read_text(encoding="utf-8") or case in CAMPAIGN


def test_every_test_the_docs_name_exists() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    found = 0
    for doc in docs:
        named, gone = _missing(doc.read_text(encoding="utf-8"), doc.name)
        found += named
        missing += gone
    assert found > 100, f"only {found} references found: has the docs' format changed?"
    assert not missing, "the docs name tests that do not exist: " + "; ".join(missing)


SOURCE = ROOT / "src" / "legion"
MODULE_PATH = re.compile(r"`(?!tests/|src/)((?:[a-z_]+/)+(?:[a-z_]+\.py)?)`")


def _layout_paths(doc: str) -> list[str]:
    """The paths the layout's tree in docs/architecture.md names: each entry's first word, under
    the folders above it (by indentation, two spaces a level); `a.py, b.py` names two."""
    tree = doc.split("```\nsrc/legion/\n", 1)[1].split("```", 1)[0]
    folders: list[str] = []
    paths = []
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words or indent >= 19 or indent % 2:  # a description's continuation
            continue
        level = indent // 2 - 1
        del folders[level:]
        names = [w.rstrip(",") for w in words[:3] if w.rstrip(",").endswith((".py", "/"))]
        if not names:
            continue
        for name in names:
            paths.append("".join(folders) + name)
        if names[0].endswith("/"):
            folders.append(names[0])
    return paths


def test_every_module_docs_architecture_names_exists() -> None:
    """The layout and the domain model in docs/architecture.md name only what is there: a module
    moved or renamed must take the doc along."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = _layout_paths(doc)
    model = doc.split("## The domain model", 1)[1].split("\n## ", 1)[0]
    named += [m.group(1) for m in MODULE_PATH.finditer(model)]
    assert len(named) > 150, f"only {len(named)} paths found: has the layout's format changed?"
    missing = sorted({p for p in named if not (SOURCE / p).exists()})
    assert not missing, "docs/architecture.md names what is not in src/legion/: " + ", ".join(
        missing
    )


def test_every_test_the_failure_model_cites_exists() -> None:
    """docs/failure-model.md says each row's test drives its fault: each must be there."""
    found, missing = _missing(FAILURE_MODEL.read_text(encoding="utf-8"), FAILURE_MODEL.name)
    assert found > 100, f"only {found} references found: has the table's format changed?"
    assert not missing, "the failure model cites tests that do not exist: " + "; ".join(missing)


def test_a_reference_to_a_missing_test_file_or_case_is_found() -> None:
    """The check above can fail: each kind of dangling reference is caught."""
    here = "tests/unit/test_doc_references.py"
    text = (
        f"`{here}::test_every_test_the_docs_name_exists`; `{here}::_tests_in`; "
        f"`tests/unit/test_gone.py::test_x`; `tests/unit/test_gone.py`; "
        "`tests/e2e/test_kill_campaign.py::test_the_swarm_survives_a_kill_at[merge_after_git]`; "
        "`tests/e2e/test_kill_campaign.py::test_the_swarm_survives_a_kill_at[no_such_point]`"
    )
    found, missing = _missing(text, "doc")
    assert found == 5
    assert missing == [
        f"doc: {here}::_tests_in",
        "doc: tests/unit/test_gone.py::test_x",
        "doc: tests/e2e/test_kill_campaign.py::test_the_swarm_survives_a_kill_at[no_such_point]"
        " (no such parameter)",
        "doc: tests/unit/test_gone.py",
    ]


def test_the_docs_say_which_kill_points_the_suite_runs() -> None:
    """architecture.md and failure-model.md say how many of the campaign's points the suite
    runs and which (`QUICK`), the rest only with FAULTS_CAMPAIGN=all or bench/faults.py."""
    quick, every = NUMBERS[len(QUICK)], NUMBERS[len(CAMPAIGN)]
    architecture = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    named = ", ".join(f"`{spec}`" for spec in QUICK)
    assert f"runs {quick} of the {every} (`QUICK`: {named})" in architecture
    failure_model = " ".join(FAILURE_MODEL.read_text(encoding="utf-8").split())
    rest = NUMBERS[len(CAMPAIGN) - len(QUICK)]
    assert f"runs {quick} of its {every} fault points in the suite (" in failure_model
    assert f"in one run); the other {rest}" in (failure_model)
    chain = "test_the_swarm_survives_a_kill_at_each_point_of_its_cycle_in_one_run` (e2e)"
    for spec in QUICK:
        cited = (
            chain if spec in QUICK_CHAIN else f"test_the_swarm_survives_a_kill_at[{spec}]` (e2e)"
        )
        assert cited in failure_model, spec
