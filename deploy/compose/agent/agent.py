"""An example agent for toolgate's compose dev setup: the official openai SDK
with base_url pointed at toolgate (OPENAI_BASE_URL), streaming.

It asks twice: once in the planning phase, where toolgate's default policy
denies `comm` tools, and once in the execution phase. It prints what it got;
a denied call arrives as an ordinary answer with no tool call.
"""

import os
import sys

from openai import OpenAI

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("comm.email", "get_weather")
]


def ask(base_url, phase, prompt):
    # toolgate reads the agent's phase from the path: /phase/<name>/v1/...
    url = base_url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")] + f"/phase/{phase}/v1"
    client = OpenAI(base_url=url, api_key=os.environ.get("OPENAI_API_KEY", "unused"))
    stream = client.chat.completions.create(
        model="mock-model",
        messages=[{"role": "user", "content": prompt}],
        tools=TOOLS,
        stream=True,
    )
    text, calls, finish = "", {}, None
    for ev in stream:
        if not ev.choices:
            continue
        c = ev.choices[0]
        text += c.delta.content or ""
        for tc in c.delta.tool_calls or []:
            entry = calls.setdefault(tc.index, ["", ""])
            entry[0] += (tc.function.name or "") if tc.function else ""
            entry[1] += (tc.function.arguments or "") if tc.function else ""
        finish = c.finish_reason or finish
    return text.strip(), [tuple(v) for _, v in sorted(calls.items())], finish


def main():
    base = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    for phase, prompt in (
        ("planning", "Plan the offsite and email Bob the agenda."),
        ("execution", "What's the weather in Lisbon?"),
    ):
        text, calls, finish = ask(base, phase, prompt)
        shown = ", ".join(f"{n}({a})" for n, a in calls) or "none"
        print(f"[{phase}] {prompt}\n  text: {text!r}\n  tool calls: {shown}\n  finish_reason: {finish}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
