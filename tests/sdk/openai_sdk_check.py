"""The official openai SDK against a running toolgate.

Usage: python openai_sdk_check.py BASE_URL FIXTURES_DIR

For each scenario, streams (accumulating with the SDK's own
ChatCompletionStreamState) and calls non-streaming, then prints one JSON object
with what the SDK produced. The Rust test that starts toolgate checks it.
"""

import json
import pathlib
import sys

import openai
from openai import OpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

SCENARIOS = {
    "all_allowed": "openrouter-anthropic-bedrock-parallel-tools.sse",
    "partly_denied": "openai-chat-gpt4o-parallel-tool-calls.sse",
    "all_denied": "azure-openai-prompt-filter-first-chunk.sse",
    "upstream_error": "groq-gptoss-error-event-midstream.sse",
}


def tools_for(fixtures: pathlib.Path, name: str):
    req = fixtures / (name.rsplit(".", 1)[0] + ".request.json")
    return json.loads(req.read_text())["tools"]


def summarize(completion):
    choice = completion.choices[0]
    calls = choice.message.tool_calls or []
    return {
        "calls": [[c.id, c.function.name, c.function.arguments] for c in calls],
        "content": choice.message.content,
        "finish": choice.finish_reason,
    }


def main() -> int:
    base_url, fixtures = sys.argv[1], pathlib.Path(sys.argv[2])
    client = OpenAI(base_url=base_url, api_key="agent-side-placeholder", max_retries=0, timeout=30)
    results = {"sdk_version": openai.__version__}
    for key, fixture in SCENARIOS.items():
        kwargs = dict(
            model="test-model",
            messages=[{"role": "user", "content": f"fixture:{fixture}"}],
            tools=tools_for(fixtures, fixture),
        )
        for stream in (True, False):
            label = f"{key}/{'stream' if stream else 'whole'}"
            try:
                if stream:
                    state = ChatCompletionStreamState()
                    for chunk in client.chat.completions.create(stream=True, **kwargs):
                        state.handle_chunk(chunk)
                    results[label] = summarize(state.get_final_completion())
                else:
                    results[label] = summarize(client.chat.completions.create(**kwargs))
            except openai.APIError as e:
                results[label] = {"raised": type(e).__name__, "message": str(e)}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
