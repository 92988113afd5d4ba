"""One long-lived `legion` process that answers a test's read-only polls.

A poll (`legion workers --json` every quarter second while a worker thinks) costs a whole
interpreter start and Legion's imports each time: most of a short command's CPU, and on two
cores the end-to-end tests spend much of theirs so. This process starts once with the
swarm's environment and working directory and runs each command asked of it through the
same `legion.cli.main` a `legion` process runs, one after another: the same code, settings
read the same way, minus the start-up. Only read-only commands come here
(`LegionReader.READ_ONLY`); everything a test does still runs as its own `legion` process.

Run as a script: each line on stdin is a JSON list of arguments; each answer is one JSON line
on stdout, `{"code": ..., "out": ..., "err": ...}`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def serve() -> None:
    from legion.cli import main

    answers = sys.stdout
    for line in sys.stdin:
        args = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        answers.write(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}))
        answers.write("\n")
        answers.flush()


if __name__ == "__main__":
    serve()
