"""The LLM importance evaluator against a local OpenAI-compatible server started here (this
machine has no model): the prompt and parsing, a slow answer, a malformed one, a 500, the
cache, and a StoreBatch rated in one request."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.importance import RuleBasedEvaluator
from celestial_memory.domain.requests import NewMemory
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.understanding.llm_importance import PROMPT, LlmEvaluator, parse_scores

RULES = RuleBasedEvaluator()


class FakeModel:
    """A chat completions endpoint. ``mode``: "ok" rates each numbered memory by its length
    (a known answer), "slow" answers after 3 s, "malformed" answers prose, "500" fails."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                model.headers.append(dict(self.headers))
                if model.mode == "500":
                    self.send_response(500)
                    self.end_headers()
                    return
                if model.mode == "slow":
                    time.sleep(3)
                lines = re.findall(r"^(\d+)\. (.*)$", body["messages"][1]["content"], re.M)
                text = ("I would say these are all quite important!" if model.mode == "malformed"
                        else "\n".join(f"{n}: {min(len(t), 100) / 100:.2f}" for n, t in lines))
                out = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                      "role": "assistant", "content": text}}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the client gave up (the slow mode)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def model() -> Iterator[FakeModel]:
    m = FakeModel()
    yield m
    m.server.shutdown()


def evaluator(model: FakeModel, budget_s: float = 2.0) -> LlmEvaluator:
    return LlmEvaluator(model.url, "tiny-rater", "sk-test", budget_s, RULES)


def test_prompt_and_parsing(model: FakeModel) -> None:
    ev = evaluator(model)
    texts = ["Remember: the deadline is Friday", "ok", "x" * 250]
    assert ev.evaluate_many(texts) == [0.32, 0.02, 1.0]
    (req,) = model.requests
    assert req["model"] == "tiny-rater" and req["messages"][0]["content"] == PROMPT
    assert req["messages"][1]["content"].splitlines()[0] == "1. Remember: the deadline is Friday"
    assert model.headers[0]["Authorization"] == "Bearer sk-test"
    # Cached: asking again sends nothing; another tenant's cache is its own.
    assert ev.evaluate("ok") == 0.02 and len(model.requests) == 1
    assert ev.evaluate_many(["ok"], tenant="other") == [0.02] and len(model.requests) == 2
    ev.close()


def test_parse_scores_rejects_what_is_not_one_score_per_memory() -> None:
    assert parse_scores("1: 0.5\n2: 1\n\n3: .25", 3) == [0.5, 1.0, 0.25]
    for bad in ("1: 0.5", "1: 0.5\n2: 1.5", "1: 0.5\n1: 0.6", "0.5\n0.6", "1: high\n2: low"):
        with pytest.raises(ValueError):
            parse_scores(bad, 2)


def test_a_slow_answer_falls_back_to_the_rules_within_the_budget(model: FakeModel) -> None:
    model.mode = "slow"
    ev = evaluator(model, budget_s=0.3)
    text = "We must finish the report before the deadline"
    started = time.monotonic()
    assert ev.evaluate(text) == RULES.evaluate(text)
    assert time.monotonic() - started < 2.0  # the model takes 3 s; the budget is 0.3 s
    assert ev.fallbacks == 1
    ev.close()


@pytest.mark.parametrize("mode", ["malformed", "500"])
def test_a_bad_answer_falls_back_to_the_rules(model: FakeModel, mode: str) -> None:
    model.mode = mode
    ev = evaluator(model)
    texts = ["I love hiking in the Alps", "password is hunter2"]
    assert ev.evaluate_many(texts) == [RULES.evaluate(t) for t in texts]
    assert ev.fallbacks == 2 and len(model.requests) == 1
    model.mode = "ok"  # nothing bad was cached
    assert ev.evaluate_many(texts) == [0.25, 0.19]
    ev.close()


def test_an_unreachable_endpoint_falls_back() -> None:
    ev = LlmEvaluator("http://127.0.0.1:9/v1", "m", None, 0.5, RULES)
    assert ev.evaluate("the meeting is on Tuesday") == RULES.evaluate("the meeting is on Tuesday")
    ev.close()


def test_the_service_rates_a_store_batch_in_one_request(
    model: FakeModel, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, importance_evaluator="llm",
                        importance_llm_base_url=model.url, importance_llm_model="tiny-rater",
                        importance_llm_api_key="sk-test")  # type: ignore[arg-type]
    svc = build_service(settings, embedder=embedder, clock=ManualClock(1_700_000_000.0))
    try:
        given = svc.store_memory("t", NewMemory("the sky is blue", importance=0.9))
        assert given.importance == 0.9 and not model.requests  # given: not asked
        items = [NewMemory(f"memory number {i} about the quarterly budget review") for i in range(20)]
        stored = svc.store_batch("t", items)
        assert len(model.requests) == 2  # 20 texts in chunks of 16, sent at once
        assert [m.importance for m in stored.memories] == [
            round(len(it.content) / 100, 2) for it in items]
    finally:
        svc.close()


def test_llm_needs_an_endpoint_and_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CELESTIAL_LLM_BASE_URL"):
        Settings(data_dir=tmp_path, importance_evaluator="llm")
