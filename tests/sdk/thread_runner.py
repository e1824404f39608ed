"""The anthropic SDK's `tool_runner` (server-held message threads) through toolgate.

Usage: python thread_runner.py BASE_URL stream|plain

Runs `client.beta.messages.tool_runner(...)` with two tools, `get_weather`
and `comm__email`, to the end, and prints which tools ran (with their
input), how many assistant messages the runner yielded and the last one's
text. Any exception is printed as `{"raised": ...}`.
"""

import json
import sys

import anthropic
from anthropic import beta_tool

RAN = []


@beta_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    RAN.append(["get_weather", {"city": city}])
    return f"Sunny in {city}."


@beta_tool
def comm__email(to: str, body: str) -> str:
    """Send an email."""
    RAN.append(["comm__email", {"to": to, "body": body}])
    return "sent"


def main():
    base, mode = sys.argv[1], sys.argv[2]
    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    try:
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=200,
            system="You are a careful assistant.",
            tools=[get_weather, comm__email],
            messages=[{"role": "user", "content": "Weather in Paris, then email Bob about it."}],
            stream=mode == "stream",
        )
        turns, last = 0, None
        for item in runner:
            turns += 1
            last = item.get_final_message() if mode == "stream" else item
        text = "".join(b.text for b in last.content if b.type == "text") if last else None
        print(json.dumps({"ran": RAN, "turns": turns, "text": text}))
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(json.dumps({"raised": type(e).__name__, "message": str(e), "ran": RAN}))


if __name__ == "__main__":
    main()
