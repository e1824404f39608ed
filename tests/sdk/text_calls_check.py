"""Calls written as text, through the official openai SDK (streamed and not).

Usage: python text_calls_check.py BASE_URL

Makes four requests (streamed, streamed, whole, whole), declaring the tools
`shell` and `read_file`, and prints one JSON object: for each, the text the
SDK accumulated and the finish reason it reported.
"""

import json
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("shell", "read_file")]


def main() -> int:
    client = OpenAI(base_url=sys.argv[1], api_key="agent-side-placeholder", max_retries=0, timeout=30)
    out = {}
    for case in ("stream_denied", "stream_allowed"):
        text, finish = "", None
        with client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                            tools=TOOLS, stream=True) as s:
            for chunk in s:
                for ch in chunk.choices:
                    text += ch.delta.content or ""
                    finish = ch.finish_reason or finish
        out[case] = {"text": text, "finish": finish}
    for case in ("whole_denied", "whole_allowed"):
        c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
        out[case] = {"text": c.choices[0].message.content, "finish": c.choices[0].finish_reason}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
