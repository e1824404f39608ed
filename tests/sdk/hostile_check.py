"""Real clients as judges of what a hostile Responses provider gets past toolgate.

Usage: python hostile_check.py BASE_URL SCENARIO [SCENARIO ...]

Each scenario is a model name the scripted provider answers with its own
stream. For each one, every judge reports the function calls it would run
(`[name, arguments]`, the name with its namespace when it has one), or what
it raised:

- snapshot: openai-python's `responses.stream()`: the call names its
  snapshot showed after any event (built from each item's first event and
  its deltas), the calls of its last snapshot, and of
  `get_final_response()`; when it raised, only the names;
- completed: `responses.create(stream=True)`, the calls of the
  `response.completed` event's `output` (what the Agents SDK runs);
- agents: the OpenAI Agents SDK running an agent whose tools record that
  they ran (plain tools and tools grouped with `tool_namespace`);
- langchain: `langchain-openai`'s `ChatOpenAI(use_responses_api=True)`
  streamed, the tool calls of the chunks added together.
"""

import asyncio
import json
import sys
import traceback

from openai import AsyncOpenAI, OpenAI

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}
CRM = {"type": "object", "properties": {"who": {"type": "string"}}}
TOOLS = [
    {"type": "function", "name": "read_file", "parameters": PARAMS},
    {"type": "function", "name": "delete_file", "parameters": PARAMS},
    {
        "type": "namespace",
        "name": "crm",
        "description": "The customer records.",
        "tools": [
            {"type": "function", "name": "find_contact", "parameters": CRM},
            {"type": "function", "name": "delete_contact", "parameters": CRM},
        ],
    },
]


def raised(e):
    return {"raised": type(e).__name__, "detail": str(e)[:300]}


def name_of(item):
    ns = getattr(item, "namespace", None)
    return f"{ns}.{item.name}" if ns else item.name


def calls_of(output):
    return [[name_of(i), i.arguments] for i in output if i.type == "function_call"]


def snapshot(client, model):
    # The names any snapshot showed, and the calls of the last one (while
    # a call streams, its arguments are partial).
    names, seen = [], []
    try:
        with client.responses.stream(model=model, input="go", tools=TOOLS) as stream:
            for _ in stream:
                # The snapshot the stream keeps (private in this SDK version).
                state = stream._state
                snap = getattr(state, "current_snapshot", None) or state._ResponseStreamState__current_snapshot
                seen = calls_of(snap.output if snap else [])
                names.extend(n for n, _ in seen if n not in names)
            final = calls_of(stream.get_final_response().output)
    except Exception as e:  # noqa: BLE001 - a judge that refused is reported
        return {"names": names, **raised(e)}
    return {"names": names, "calls": seen, "final": final}


def completed(client, model):
    calls = []
    try:
        for event in client.responses.create(model=model, input="go", tools=TOOLS, stream=True):
            if event.type == "response.completed":
                calls = calls_of(event.response.output)
    except Exception as e:  # noqa: BLE001
        return {"calls": calls, **raised(e)}
    return {"calls": calls}


async def agents(base_url, model):
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from agents import tool_namespace

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    ran = []

    @function_tool
    def read_file(path: str) -> str:
        """Reads a file."""
        ran.append(["read_file", json.dumps({"path": path}, separators=(",", ":"))])
        return "contents"

    @function_tool
    def delete_file(path: str) -> str:
        """Deletes a file."""
        ran.append(["delete_file", json.dumps({"path": path}, separators=(",", ":"))])
        return "deleted"

    @function_tool
    def find_contact(who: str) -> str:
        """Finds a contact."""
        ran.append(["crm.find_contact", json.dumps({"who": who}, separators=(",", ":"))])
        return "found"

    @function_tool
    def delete_contact(who: str) -> str:
        """Deletes a contact."""
        ran.append(["crm.delete_contact", json.dumps({"who": who}, separators=(",", ":"))])
        return "deleted"

    crm = tool_namespace(name="crm", description="The customer records.", tools=[find_contact, delete_contact])
    agent = Agent(
        name="assistant",
        instructions="Help the user.",
        tools=[read_file, delete_file, *crm],
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )
    try:
        await Runner.run(agent, "go", max_turns=3)
    except Exception as e:  # noqa: BLE001
        return {"ran": ran, **raised(e)}
    return {"ran": ran}


def langchain(base_url, model):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=model,
        base_url=base_url,
        api_key="agent-side-placeholder",
        use_responses_api=True,
        streaming=True,
        max_retries=0,
        timeout=30,
    ).bind_tools([t for t in TOOLS if t["type"] == "function"])
    acc = None
    try:
        for chunk in llm.stream("go"):
            acc = chunk if acc is None else acc + chunk
    except Exception as e:  # noqa: BLE001
        return {"calls": [], **raised(e)}
    calls = [[c["name"], json.dumps(c["args"], separators=(",", ":"))] for c in (acc.tool_calls if acc else [])]
    return {"calls": calls}


def main() -> int:
    base_url, scenarios = sys.argv[1], sys.argv[2:]
    client = OpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    out = {}
    for s in scenarios:
        try:
            out[s] = {
                "snapshot": snapshot(client, s),
                "completed": completed(client, s),
                "agents": asyncio.run(agents(base_url, s)),
                "langchain": langchain(base_url, s),
            }
        except Exception as e:  # noqa: BLE001 - reported to the caller
            out[s] = {"harness": raised(e), "trace": traceback.format_exc()[-2000:]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
