"""One non-streaming call through the official openai SDK.

Usage: python whole_call.py BASE_URL TOOL

Declares TOOL and prints one JSON object: the calls the SDK returned
(`{"calls": [[name, arguments], ...]}`) or the error it raised
(`{"raised": "InternalServerError"}`).
"""

import json
import sys

import openai
from openai import OpenAI


def main() -> int:
    base_url, tool = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    try:
        c = client.chat.completions.create(
            model="test-model",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": tool, "parameters": {"type": "object"}}}],
        )
        calls = [[t.function.name, t.function.arguments] for t in (c.choices[0].message.tool_calls or [])]
        print(json.dumps({"calls": calls}))
    except openai.APIError as e:
        print(json.dumps({"raised": type(e).__name__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
