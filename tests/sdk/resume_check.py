"""A continued turn (`rewrite = "resume"`) read by the official openai SDK.

Usage: python resume_check.py BASE_URL

Asks three ways (a raw stream the script accumulates from the SDK's chunk
objects, the SDK's own `chat.completions.stream` helper, and a whole
response) and prints one JSON object per way: content, calls, finish
reason, id and total tokens.
"""

import json
import sys

from openai import OpenAI

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("shell", "read")
]
MESSAGES = [{"role": "user", "content": "list the files"}]


def main() -> int:
    client = OpenAI(base_url=sys.argv[1], api_key="agent-side-placeholder", max_retries=0, timeout=30)
    out = {}

    content, calls, finish, ids, total = "", [], None, set(), None
    for chunk in client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True,
        stream_options={"include_usage": True},
    ):
        ids.add(chunk.id)
        if chunk.usage is not None:
            total = chunk.usage.total_tokens
        for c in chunk.choices:
            content += c.delta.content or ""
            calls += [t.function.name for t in (c.delta.tool_calls or []) if t.function.name]
            finish = c.finish_reason or finish
    assert len(ids) == 1, ids
    out["stream"] = {"content": content, "calls": calls, "finish": finish, "id": ids.pop(), "total_tokens": total}

    with client.chat.completions.stream(
        model="m", messages=MESSAGES, tools=TOOLS, stream_options={"include_usage": True},
    ) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    out["helper"] = {
        "content": msg.content,
        "calls": [t.function.name for t in (msg.tool_calls or [])],
        "finish": final.choices[0].finish_reason,
        "id": final.id,
        "total_tokens": final.usage.total_tokens if final.usage else None,
    }

    c = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
    msg = c.choices[0].message
    out["whole"] = {
        "content": msg.content,
        "calls": [t.function.name for t in (msg.tool_calls or [])],
        "finish": c.choices[0].finish_reason,
        "id": c.id,
        "total_tokens": c.usage.total_tokens,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
