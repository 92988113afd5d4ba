"""What a Responses-API request says, as Codex 0.169.0 sends it (docs/codex-cli.md): the text
of its items, which user messages are context Codex injected rather than a human prompt, the
latest human prompt and the model turns after it, whether it asks for structured output, why a
request is a side request (a thread title, a compaction, no tools), and the tool outputs at its
end. Read by the scripted Responses-API server (`legion.demo.responses_server`).
"""

from collections.abc import Mapping, Sequence
from typing import Any

from legion.demo import script

JSON = script.JSON

# User-role messages Codex injects as context, which are not what the human typed.  The first
# two were seen in every request; the others are the forms the binary can also produce.
CONTEXT_PREFIXES = (
    "<environment_context>",
    "# AGENTS.md instructions for ",
    "<user_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<skill>",
    # after a compaction, the summary comes back as a user message starting so
    "Another language model started to solve this problem",
)

# The compaction request (`/compact`, or automatic) ends with a user message starting so.
COMPACTION_PROMPT_PREFIX = "You are performing a CONTEXT CHECKPOINT COMPACTION"
# The interactive CLI's thread-title request (a side request) starts its user message so.
TITLE_PROMPT_PREFIX = "Generate a concise, single-line task title"

# Items of `input` that the model produced (one model turn is a run of them).
OUTPUT_ITEM_TYPES = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "reasoning",
        "tool_search_call",
        "image_generation_call",
    }
)
# Items that answer a model turn (the next turn follows them).
TOOL_OUTPUT_TYPES = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


def item_text(item: Mapping[str, Any]) -> str:
    """The text of a message item (`content` is a string or a list of input/output_text)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    )


def _is_message(item: Mapping[str, Any], role: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == role


def is_context_message(item: Mapping[str, Any]) -> bool:
    """A user-role message Codex injected (environment, AGENTS.md, ...), not a human prompt."""
    return item_text(item).lstrip().startswith(CONTEXT_PREFIXES)


def is_human_message(item: Mapping[str, Any]) -> bool:
    return _is_message(item, "user") and not is_context_message(item)


def latest_human_prompt(items: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """Index and text of the last user message of `input` that is a human prompt."""
    for index in range(len(items) - 1, -1, -1):
        if is_human_message(items[index]):
            return index, item_text(items[index])
    return None


def _is_output_item(item: Mapping[str, Any]) -> bool:
    return item.get("type") in OUTPUT_ITEM_TYPES or _is_message(item, "assistant")


def assistant_turns_after(items: Sequence[Mapping[str, Any]], index: int) -> int:
    """Model turns after `index`: runs of output items (assistant messages, function calls,
    reasoning) between tool outputs and user messages; developer messages are ignored."""
    turns = 0
    previous_was_output = False
    for item in items[index + 1 :]:
        if _is_output_item(item):
            if not previous_was_output:
                turns += 1
            previous_was_output = True
        elif item.get("type") in TOOL_OUTPUT_TYPES or _is_message(item, "user"):
            previous_was_output = False
    return turns


def structured_output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema of `text.format` when the request asks for structured output."""
    fmt = body.get("text", {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else {}
    return None


def _has_tools(body: Mapping[str, Any]) -> bool:
    if body.get("tools"):
        return True
    items = body.get("input")
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "additional_tools" and i.get("tools")
        for i in items
    )


def classify_side_request(body: Mapping[str, Any]) -> str | None:
    """Why a /v1/responses request is not a main-loop request, or None.

    What Codex 0.169.0 sends (docs/codex-cli.md): main-loop and compaction requests carry its
    tools (a `tools` list, or an `additional_tools` input item for the gpt-6 models).  The TUI
    also names the thread, in a thread of its own, with a request whose last user message starts
    with `TITLE_PROMPT_PREFIX` and whose `text.format` is a JSON schema (`{"title": ...}`); it
    carries the tools with gpt-5.5 and none with gpt-6-sol.  That is "title"; any other
    tool-less request is "structured-output" (with a schema) or "no-tools".  The compaction
    request (tool-less, its last user message starting with `COMPACTION_PROMPT_PREFIX`) is
    "compaction"; its answer (`Script.side_text`) becomes the summary."""
    items = body.get("input")
    if isinstance(items, list):
        found = latest_human_prompt([i for i in items if isinstance(i, dict)])
        if found is not None and found[1].startswith(TITLE_PROMPT_PREFIX):
            return "title"
        last = next((i for i in reversed(items) if isinstance(i, dict)), None)
        if (
            last is not None
            and _is_message(last, "user")
            and item_text(last).startswith(COMPACTION_PROMPT_PREFIX)
        ):
            return "compaction"
    if structured_output_schema(body) is not None and not body.get("tools"):
        return "structured-output"
    if not _has_tools(body):
        return "no-tools"
    return None


def function_call_outputs(items: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The tool outputs at the end of `input` (what Codex answers to the last function calls)."""
    out: list[JSON] = []
    for item in reversed(items):
        if item.get("type") in TOOL_OUTPUT_TYPES:
            out.append(dict(item))
        elif _is_output_item(item):
            break
    return list(reversed(out))


def output_text(item: Mapping[str, Any]) -> str:
    """The text of a function_call_output (`output` is a string or a list of content parts)."""
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(p.get("text", "")) for p in output if isinstance(p, dict) and "text" in p
        )
    if isinstance(output, dict):
        return str(output.get("content", ""))
    return ""
