"""Provider errors as the official SDKs expose them, through toolgate.

Usage: python provider_errors.py BASE_URL CASES_JSON

CASES_JSON is a list of [sdk, stream] pairs, sdk "openai" (Chat
Completions) or "anthropic" (Messages), stream true or false. Each case
makes one request (no retries) and prints what the SDK raised: its class,
status, request id, message, and the error fields the SDK reads (openai:
type, code, param; anthropic: the body's error type and details). The
provider answers the cases in order.
"""

import json
import sys

import anthropic
import openai

TOOLS_OPENAI = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
TOOLS_ANTHROPIC = [{"name": "get_weather", "input_schema": {"type": "object"}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def run_openai(base, stream):
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    try:
        if stream:
            for _ in client.chat.completions.create(model="m", messages=ASK, tools=TOOLS_OPENAI, stream=True):
                pass
        else:
            client.chat.completions.create(model="m", messages=ASK, tools=TOOLS_OPENAI)
    except openai.APIError as e:
        return {
            "class": type(e).__name__,
            "status": getattr(e, "status_code", None),
            "request_id": getattr(e, "request_id", None),
            "message": e.message,
            "type": e.type,
            "code": e.code,
            "param": e.param,
        }
    return {"class": None}


def run_anthropic(base, stream):
    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    try:
        if stream:
            with client.messages.stream(model="m", max_tokens=100, messages=ASK, tools=TOOLS_ANTHROPIC) as s:
                for _ in s:
                    pass
        else:
            client.messages.create(model="m", max_tokens=100, messages=ASK, tools=TOOLS_ANTHROPIC)
    except anthropic.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error") if isinstance(body.get("error"), dict) else {}
        return {
            "class": type(e).__name__,
            "status": e.status_code,
            "request_id": e.request_id,
            "message": e.message,
            "type": err.get("type"),
            "details": err.get("details"),
        }
    return {"class": None}


def main():
    base = sys.argv[1]
    out = []
    for sdk, stream in json.loads(sys.argv[2]):
        out.append((run_openai if sdk == "openai" else run_anthropic)(base, stream))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
