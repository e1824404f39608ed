"""The official openai SDK waiting on calls a person must approve.

Usage: python approval_check.py BASE_URL stream|whole [SESSION]

Makes one request declaring `pay` and `refund` in the execution phase (the
test's policy asks a person about both), streamed (accumulated with the SDK's
own ChatCompletionStreamState) or not, and prints one JSON object: the calls,
the content and the finish reason the SDK produced, and the seconds it waited.
"""

import json
import sys
import time

import openai
from openai import OpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("pay", "refund")
]


def main() -> int:
    base_url, mode = sys.argv[1], sys.argv[2]
    headers = {"x-toolgate-phase": "execution"}
    if len(sys.argv) > 3:
        headers["x-toolgate-session"] = sys.argv[3]
    client = OpenAI(
        base_url=base_url,
        api_key="agent-token",
        max_retries=0,
        timeout=60,
        default_headers=headers,
    )
    kwargs = dict(
        model="test-model",
        messages=[{"role": "user", "content": "pay the invoice"}],
        tools=TOOLS,
    )
    started = time.monotonic()
    if mode == "stream":
        state = ChatCompletionStreamState()
        for chunk in client.chat.completions.create(stream=True, **kwargs):
            state.handle_chunk(chunk)
        completion = state.get_final_completion()
    else:
        completion = client.chat.completions.create(**kwargs)
    choice = completion.choices[0]
    calls = choice.message.tool_calls or []
    print(
        json.dumps(
            {
                "sdk_version": openai.__version__,
                "calls": [[c.id, c.function.name, c.function.arguments] for c in calls],
                "content": choice.message.content,
                "finish": choice.finish_reason,
                "waited": time.monotonic() - started,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
