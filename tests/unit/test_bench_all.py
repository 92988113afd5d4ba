"""`bench/all.py` writes the README's table of figures from what the benchmarks printed: each
benchmark's lines in its row, the date and commit above, and a failed or skipped benchmark's
row kept as it was."""

from __future__ import annotations

from tests.support.bench import BENCH, load_bench


def test_the_table_holds_what_each_benchmark_printed_and_keeps_the_rest() -> None:
    bench = load_bench("all")
    first = bench.table(
        {
            "cli_latency": bench.Measured("cli_latency", True, ["median 0.1 s", "a | b"], 3.0),
            "bus": bench.Measured("bus", True, ["6,000 posts/s"], 9.0),
        },
        {},
    )
    assert first.startswith(bench.BEGIN) and first.endswith(bench.END)
    assert "at commit " in first
    rows = bench.previous_rows(first)
    assert rows["cli_latency"] == "median 0.1 s<br>a \\| b"
    assert rows["bus"] == "6,000 posts/s"
    assert rows["swarm"] == "not measured"
    # Measured again: a failure says so and keeps the figure it had; the unmeasured stay.
    second = bench.table(
        {"bus": bench.Measured("bus", False, ["failed (exit 1): boom"], 1.0)}, rows
    )
    again = bench.previous_rows(second)
    assert again["bus"] == "failed (exit 1): boom<br>before: 6,000 posts/s"
    assert again["cli_latency"] == rows["cli_latency"]
    assert [name for name, _ in bench.BENCHMARKS] == list(again)


def test_the_readme_has_the_section_bench_all_writes() -> None:
    bench = load_bench("all")
    readme = bench.README.read_text(encoding="utf-8")
    assert readme.count(bench.BEGIN) == 1 and readme.count(bench.END) == 1
    rows = bench.previous_rows(readme)
    assert list(rows) == [name for name, _ in bench.BENCHMARKS]
    for name in rows:
        assert (BENCH / f"{name}.py").is_file(), name
