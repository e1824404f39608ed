"""Structured output through a gate that withholds the model's only call.

Usage: python structured_check.py BASE_URL [chat|responses|agents]

Asks for a pydantic `response_format` with the openai SDK's helpers
(`chat.completions.parse` and the `chat.completions.stream` helper) while
the model calls a strict tool the policy rejects. Prints, for each, what the
SDK made of the answer: its `parsed` value, `refusal`, `content` and finish
reason, or the exception it raised. `agents` runs an OpenAI Agents SDK agent
with an `output_type` (streamed and not) and prints what its run raised.
"""

import json
import sys

from openai import OpenAI
from pydantic import BaseModel


class Weather(BaseModel):
    city: str
    celsius: float


TOOLS = [{"type": "function", "function": {
    "name": "shell", "strict": True,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                   "required": ["cmd"], "additionalProperties": False}}}]
MESSAGES = [{"role": "user", "content": "weather in Paris, as JSON"}]


def describe(completion) -> dict:
    c = completion.choices[0]
    return {"parsed": c.message.parsed.model_dump() if c.message.parsed else None,
            "refusal": c.message.refusal, "content": c.message.content,
            "finish": c.finish_reason, "calls": len(c.message.tool_calls or [])}


RESPONSES_TOOLS = [{"type": "function", "name": n, "strict": True,
                    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}
                   for n in ("get_weather", "shell")]


def describe_response(r) -> dict:
    parts = [p for i in r.output if i.type == "message" for p in i.content]
    return {"parsed": r.output_parsed.model_dump() if r.output_parsed else None,
            "refusal": " ".join(p.refusal for p in parts if p.type == "refusal") or None,
            "content": "".join(p.text for p in parts if p.type == "output_text") or None,
            "calls": len([i for i in r.output if i.type == "function_call"])}


def responses(client: OpenAI) -> dict:
    out = {}
    try:
        out["parse"] = describe_response(client.responses.parse(
            model="m", input="weather in Paris, as JSON", tools=RESPONSES_TOOLS, text_format=Weather))
    except Exception as e:  # noqa: BLE001
        out["parse"] = {"raised": f"{type(e).__name__}: {e}"}
    try:
        with client.responses.stream(model="m", input="weather in Paris, as JSON",
                                     tools=RESPONSES_TOOLS, text_format=Weather) as s:
            out["stream"] = describe_response(s.get_final_response())
    except Exception as e:  # noqa: BLE001
        out["stream"] = {"raised": f"{type(e).__name__}: {e}"}
    return out


def agents(base_url: str) -> dict:
    import asyncio

    from agents import Agent, OpenAIResponsesModel, Runner, function_tool
    from agents.exceptions import ModelRefusalError
    from openai import AsyncOpenAI

    @function_tool
    def shell(cmd: str) -> str:
        """Runs a shell command."""
        return "ran"

    client = AsyncOpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    agent = Agent(name="weather", instructions="Answer with the weather.", tools=[shell],
                  output_type=Weather, model=OpenAIResponsesModel(model="m", openai_client=client))

    async def run(streamed: bool) -> dict:
        try:
            if streamed:
                r = Runner.run_streamed(agent, "weather in Paris, as JSON", max_turns=2)
                async for _ in r.stream_events():
                    pass
            else:
                r = await Runner.run(agent, "weather in Paris, as JSON", max_turns=2)
            return {"output": repr(r.final_output)}
        except ModelRefusalError as e:
            return {"refusal": e.refusal}
        except Exception as e:  # noqa: BLE001 - the test reports what the SDK raised
            return {"raised": f"{type(e).__name__}: {e}"}

    async def both() -> dict:
        return {"run": await run(False), "run_streamed": await run(True)}

    return asyncio.run(both())


def main() -> int:
    if sys.argv[2:] == ["agents"]:
        print(json.dumps(agents(sys.argv[1])))
        return 0
    client = OpenAI(base_url=sys.argv[1], api_key="agent-side-placeholder", max_retries=0, timeout=30)
    if sys.argv[2:] == ["responses"]:
        print(json.dumps(responses(client)))
        return 0
    out = {}
    try:
        out["parse"] = describe(client.chat.completions.parse(
            model="m", messages=MESSAGES, tools=TOOLS, response_format=Weather))
    except Exception as e:  # noqa: BLE001 - the test reports what the SDK raised
        out["parse"] = {"raised": f"{type(e).__name__}: {e}"}
    try:
        with client.chat.completions.stream(
                model="m", messages=MESSAGES, tools=TOOLS, response_format=Weather) as s:
            out["stream"] = describe(s.get_final_completion())
    except Exception as e:  # noqa: BLE001
        out["stream"] = {"raised": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
