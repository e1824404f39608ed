"""The official openai SDK and the OpenAI Agents SDK on the Responses API.

Usage: python responses_check.py BASE_URL sdk|agents

sdk: `client.responses.create(stream=True)` iterated to the end,
`client.responses.stream(...)` with `get_final_response()`, and a plain
`client.responses.create(...)`; prints the function calls each one saw
(`[call_id, name, arguments]`) and the final text.

agents: a two-turn agent loop with two function tools, `get_weather` and
`shell`; prints which tools ran and each run's final output, including a
run that continues with `previous_response_id` after a rejection.

Any exception is printed as `{"raised": ...}` so the caller can say which.
"""

import asyncio
import json
import sys
import traceback

from openai import AsyncOpenAI, OpenAI

TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
]


def calls_of(response):
    return [[i.call_id, i.name, i.arguments] for i in response.output if i.type == "function_call"]


def sdk(base_url):
    client = OpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    out = {}
    final = None
    types = []
    for event in client.responses.create(model="test-model", input="hi", tools=TOOLS, stream=True):
        types.append(event.type)
        if event.type == "response.completed":
            final = event.response
    out["create_stream"] = {"calls": calls_of(final), "text": final.output_text, "events": len(types)}
    with client.responses.stream(model="test-model", input="hi", tools=TOOLS) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    out["stream"] = {"calls": calls_of(final), "text": final.output_text}
    r = client.responses.create(model="test-model", input="hi", tools=TOOLS)
    out["create"] = {"calls": calls_of(r), "text": r.output_text}
    return out


async def agents_loop(base_url):
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

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
    weather = await Runner.run(agent, "weather in Paris?")
    denied = await Runner.run(agent, "clean up the disk")
    chained = await Runner.run(agent, "and now?", previous_response_id=denied.last_response_id)
    return {
        "ran": ran,
        "weather": weather.final_output,
        "denied": denied.final_output,
        "chained": chained.final_output,
    }


def main() -> int:
    base_url, mode = sys.argv[1], sys.argv[2]
    try:
        out = sdk(base_url) if mode == "sdk" else asyncio.run(agents_loop(base_url))
    except Exception as e:  # noqa: BLE001 - reported to the caller
        out = {"raised": type(e).__name__, "detail": str(e)[:500], "trace": traceback.format_exc()[-2000:]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
