"""A benchmark of `bench/` loaded as a module, for the tests of its pure parts (the benchmarks
are scripts, not a package: each finds its `common` beside it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """`bench/<name>.py` as the module `bench_<name>`."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # its `common`
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module
