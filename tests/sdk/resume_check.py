"""A continued turn (`rewrite = "resume"`) read by the official openai SDK.

Usage: python resume_check.py BASE_URL [chat|responses]

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


def responses(client: OpenAI) -> dict:
    """The Responses API: raw events, the stream helper, a whole response."""
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("get_weather", "shell")]
    out = {}
    ids, texts, end = set(), "", None
    for ev in client.responses.create(model="m", input="go", tools=tools, stream=True):
        if ev.type == "response.created":
            ids.add(ev.response.id)
        if ev.type == "response.output_text.delta":
            texts += ev.delta
        if ev.type == "response.completed":
            end = ev.response
    out["stream"] = {"text": texts, "ids": sorted(ids), "id": end.id, "output_text": end.output_text,
                     "calls": [i.name for i in end.output if i.type == "function_call"]}
    with client.responses.stream(model="m", input="go", tools=tools) as s:
        final = s.get_final_response()
    out["helper"] = {"id": final.id, "output_text": final.output_text,
                     "calls": [i.name for i in final.output if i.type == "function_call"]}
    r = client.responses.create(model="m", input="go", tools=tools)
    out["whole"] = {"id": r.id, "output_text": r.output_text,
                    "calls": [i.name for i in r.output if i.type == "function_call"]}
    return out


def main() -> int:
    client = OpenAI(base_url=sys.argv[1], api_key="agent-side-placeholder", max_retries=0, timeout=30)
    if sys.argv[2:] == ["responses"]:
        print(json.dumps(responses(client)))
        return 0
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
