"""Sessions: the agent CLIs Legion runs in tmux windows (the controller and the workers).

One subsystem, each job in one module: `registry` (which sessions Legion started), `runtimes`
(which CLI a session runs on), `windows` (the project's tmux windows), `supervisor` (starting
and stopping any session), `starts` (waiting for workers' starts), `roster` (the workers as
observed), `workers` (dispatching, resuming, retiring and answering them), `observer` (one look
at every session, in one vocabulary, `legion.core.liveness`'s) and `prompting` (the one
confirmed way to type into a session). Runtime specifics (a CLI's command, transcript,
question screen) stay in `legion.runtime`, behind the `AgentRuntime` protocol; workflow labels
are the reconciler's.
"""
