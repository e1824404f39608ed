"""Structured output through a gate that withholds the model's only call.

Usage: python structured_check.py BASE_URL

Asks for a pydantic `response_format` with the openai SDK's helpers
(`chat.completions.parse` and the `chat.completions.stream` helper) while
the model calls a strict tool the policy rejects. Prints, for each, what the
SDK made of the answer: its `parsed` value, `refusal`, `content` and finish
reason, or the exception it raised.
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


def main() -> int:
    client = OpenAI(base_url=sys.argv[1], api_key="agent-side-placeholder", max_retries=0, timeout=30)
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
