"""The official Google GenAI SDK (`google-genai`) on the Gemini API, through toolgate.

Usage: python gemini_check.py BASE_URL sdk|afc

sdk: `client.models.generate_content(...)` and `generate_content_stream(...)`
with the tools declared and automatic function calling off; prints the calls
each one saw (`[name, args]`), its text and finish reason.

afc: the same two with Python functions as tools and automatic function
calling on: the SDK runs each call it receives and sends the result back;
prints which functions ran and the final text.

Any exception is printed as `{"raised": ...}` so the caller can say which.
"""

import json
import sys
import traceback

from google import genai
from google.genai import types

RAN = []


def get_weather(city: str) -> dict:
    """The weather in a city."""
    RAN.append(["get_weather", city])
    return {"output": "Sunny, 21 C."}


def run_shell(command: str) -> dict:
    """Runs a shell command."""
    RAN.append(["run_shell", command])
    return {"output": "done"}


DECLARED = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="The weather in a city.",
            parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        types.FunctionDeclaration(
            name="run_shell",
            description="Runs a shell command.",
            parameters=types.Schema(type="OBJECT", properties={"command": types.Schema(type="STRING")}),
        ),
    ]
)


def client(base_url):
    return genai.Client(
        api_key="agent-side-placeholder",
        http_options=types.HttpOptions(base_url=base_url, timeout=30_000),
    )


def summary(calls, text, finish):
    return {"calls": [[c.name, dict(c.args or {})] for c in calls], "text": text, "finish": finish}


def sdk(base_url):
    c = client(base_url)
    config = types.GenerateContentConfig(
        tools=[DECLARED],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    r = c.models.generate_content(model="gemini-2.5-flash", contents="Weather in Paris?", config=config)
    out = {"whole": summary(r.function_calls or [], r.text or "", str(r.candidates[0].finish_reason))}
    calls, text, finish = [], "", None
    for chunk in c.models.generate_content_stream(model="gemini-2.5-flash", contents="Weather in Paris?", config=config):
        calls.extend(chunk.function_calls or [])
        text += chunk.text or ""
        if chunk.candidates and chunk.candidates[0].finish_reason:
            finish = str(chunk.candidates[0].finish_reason)
    out["stream"] = summary(calls, text, finish)
    return out


def afc(base_url):
    c = client(base_url)
    config = types.GenerateContentConfig(tools=[get_weather, run_shell])
    out = {}
    r = c.models.generate_content(model="gemini-2.5-flash", contents="Weather in Paris?", config=config)
    out["whole"] = {"ran": list(RAN), "final": r.text}
    RAN.clear()
    text = ""
    for chunk in c.models.generate_content_stream(model="gemini-2.5-flash", contents="Weather in Paris?", config=config):
        text += chunk.text or ""
    out["stream"] = {"ran": list(RAN), "final": text}
    return out


def main():
    base_url, mode = sys.argv[1], sys.argv[2]
    try:
        out = {"sdk": sdk, "afc": afc}[mode](base_url)
        out["sdk_version"] = genai.__version__
    except Exception as e:  # the caller reports which
        out = {"raised": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
