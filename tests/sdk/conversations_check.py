"""The official openai SDK's `conversations` client and the OpenAI Agents
SDK's `OpenAIConversationsSession`, through toolgate.

Usage: python conversations_check.py BASE_URL

sdk: a conversation created with a user message, a call and its output
written as items, then listed (`order="asc"`); prints the item types and
the output read back.

agents: two runs of an agent with `get_weather` and `shell` in one
conversation session (its history written to and read from the
Conversations API); prints which tools ran and each run's final output.

Any exception is printed as `{"raised": ...}` so the caller can say which.
"""

import asyncio
import json
import sys
import traceback

from openai import AsyncOpenAI, OpenAI


def sdk(base_url):
    client = OpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    conv = client.conversations.create(items=[{"type": "message", "role": "user", "content": "weather?"}])
    client.conversations.items.create(
        conv.id,
        items=[
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ],
    )
    items = list(client.conversations.items.list(conv.id, order="asc"))
    return {
        "types": [i.type for i in items],
        "output": next(i.output for i in items if i.type == "function_call_output"),
    }


async def agents(base_url):
    from agents import Agent, OpenAIConversationsSession, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    ran = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(["get_weather", city])
        return "sunny"

    @function_tool
    def shell(cmd: str) -> str:
        """Runs a shell command."""
        ran.append(["shell", cmd])
        return "done"

    agent = Agent(
        name="assistant",
        instructions="Help the user.",
        tools=[get_weather, shell],
        model=OpenAIResponsesModel(model="test-model", openai_client=client),
    )
    session = OpenAIConversationsSession(openai_client=client)
    weather = await Runner.run(agent, "weather in Paris?", session=session)
    denied = await Runner.run(agent, "clean up the disk", session=session)
    return {"ran": ran, "weather": weather.final_output, "denied": denied.final_output}


def main() -> int:
    base_url = sys.argv[1]
    try:
        out = {"sdk": sdk(base_url), "agents": asyncio.run(agents(base_url))}
    except Exception as e:  # noqa: BLE001 - reported to the caller
        out = {"raised": type(e).__name__, "detail": str(e)[:500], "trace": traceback.format_exc()[-2000:]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
