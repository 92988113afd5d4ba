"""Which scenario and turn the scripted model plays for a request: the latest human prompt
decides, and a scenario marked `anywhere` also catches a prompt the CLI merged into a tool
result's message (as Claude Code does when a turn was cut short on a tool result)."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server import FakeModelServer, Scenario, bash, text

PROMPT = {"role": "user", "content": [{"type": "text", "text": "implement mode for LEG-1"}]}
TOOL_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "true"}}],
}


def result(*texts: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]
    return {"role": "user", "content": content + [{"type": "text", "text": t} for t in texts]}


def played(server: FakeModelServer, *messages: dict[str, Any]) -> tuple[str, int]:
    body = {
        "model": "m",
        "max_tokens": 100,
        "tools": [{"name": "Bash"}],
        "messages": list(messages),
    }
    _, record = server.answer(body)
    return record["scenario"], record["turn"]


def test_a_prompt_merged_into_a_tool_result_is_caught_only_by_a_scenario_that_asks() -> None:
    spend = Scenario("implement mode for LEG-1", [[bash("true")]] * 5, name="spend")
    answered = Scenario("go on", [[bash("true")], [text("done")]], name="answered", anywhere=True)
    server = FakeModelServer([answered, spend])
    assert played(server, PROMPT, TOOL_USE, result()) == ("spend", 1)
    merged = result("A human answered: go on")
    assert played(server, PROMPT, TOOL_USE, merged) == ("answered", 0)
    assert played(server, PROMPT, TOOL_USE, merged, TOOL_USE, result()) == ("answered", 1)
    # Text the CLI adds to a result (a skill's, a reminder) leaves the scenario as it was.
    assert played(server, PROMPT, TOOL_USE, result("Base directory for this skill")) == (
        "spend",
        1,
    )
    plain = FakeModelServer([Scenario("go on", [[text("x")]], name="answered"), spend])
    assert played(plain, PROMPT, TOOL_USE, merged) == ("spend", 1)


def test_the_oracle_deals_with_every_question_its_wake_names() -> None:
    """Two questions asked close together reach the controller in one wake: the scripted
    Oracle answers both there (a real model would), and each alone in a wake of its own."""
    from legion.demo.swarm_script import swarm_script

    script = swarm_script(["LEG-1", "LEG-2"], ask=("LEG-1", "LEG-2"), oracle={"LEG-1": "Hi"})

    def wake(items: str) -> str:
        return f"<command-args>wake: needs judgment: {items} (auto mode)</command-args>"

    both = script.find(wake("LEG-2:oracle, LEG-1:oracle"))
    assert both is not None and both.name == "LEG-1:LEG-2:oracle"
    (command,) = [block.input["command"] for block in both.turns[1]]
    assert "legion answer LEG-1 Hi" in command and "legion escalate LEG-2" in command
    alone = script.find(wake("LEG-2:oracle"))
    assert alone is not None and alone.name == "LEG-2:oracle"
    assert script.find(wake("LEG-12:oracle")) is None
