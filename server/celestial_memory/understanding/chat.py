"""One client for the OpenAI-compatible chat completions endpoint every model-backed feature
uses (its settings are the ``llm_*`` fields of config.py): a call, its answer text and the tokens
it cost, or a ``ModelError`` that says what went wrong. Retrying is the caller's business: the
extraction queue retries with backoff, the importance evaluator falls back to the rules."""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx
from celestial_memory.config import Settings


class ModelError(Exception):
    """The endpoint failed, timed out or answered something that is no chat completion."""


def numbered_entries(answer: str, key: str, n: int, noun: str) -> list[dict[str, Any]]:
    """The objects of the JSON answer's ``key`` list, one for each of items 1 to ``n`` (their
    ``"n"``), in that order; ModelError when the answer is not that. ``noun`` names an item in
    the error (memory, entity)."""
    text = answer.strip()
    if text.startswith("```"):  # a fenced block despite the instructions
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ModelError(f"the answer is not JSON: {text[:80]!r}") from e
    entries = data.get(key) if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ModelError(f'the answer has no "{key}" list')
    out: dict[int, dict[str, Any]] = {}
    for entry in entries:
        k = entry.get("n") if isinstance(entry, dict) else None
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n or k in out:
            raise ModelError(f"an entry for no {noun} asked, or twice: {str(entry)[:80]!r}")
        out[k] = entry
    if len(out) != n:
        raise ModelError(f"{counted(len(out), 'entry')} for {counted(n, noun)}")
    return [out[k] for k in range(1, n + 1)]


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: "1 entity", "2 entities", "0 entries"."""
    if n == 1:
        return f"{n} {noun}"
    consonant_y = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
    return f"{n} {noun[:-1] + 'ies' if consonant_y else noun + 's'}"


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    tokens: int  # prompt plus completion, as the endpoint reports (estimated when it does not)


class ChatModel:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, timeout=timeout_s)
        self._lock = threading.Lock()
        self.calls = 0  # sent, for tests and logs

    def ask(self, system: str, user: str, *, json_answer: bool = False) -> Answer:
        with self._lock:
            self.calls += 1
        body: dict[str, object] = {
            "model": self.model, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        if json_answer:
            body["response_format"] = {"type": "json_object"}
        try:
            reply = self._http.post(self._url, json=body)
        except httpx.TimeoutException as e:
            raise ModelError(f"no answer within {self._http.timeout.read} s") from e
        except httpx.HTTPError as e:
            raise ModelError(f"cannot reach the model: {type(e).__name__}") from e
        if reply.status_code != 200:
            raise ModelError(f"the model answered HTTP {reply.status_code}")
        try:
            data = reply.json()
            text = data["choices"][0]["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ModelError(f"not a chat completion: {e}") from e
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int):  # about 4 characters a token
            tokens = (len(system) + len(user) + len(text)) // 4
        return Answer(text, tokens)

    def close(self) -> None:
        self._http.close()


def shown_url(url: str) -> str:
    """``url`` for a log line: without a user and password, a query or a fragment, where a key
    may have been put."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def endpoints_in_use(s: Settings) -> list[str]:
    """For the start-up log: each model endpoint the settings name, its model, whether a key is
    sent (never the key) and what asks it; empty without one."""
    asked: dict[tuple[str, str, bool], list[str]] = {}
    if s.has_model:
        asked[(s.llm_base_url, s.llm_model, s.llm_api_key is not None)] = [
            "reflection", *(["entity extraction"] if s.extractor == "llm" else [])]
    if s.importance_evaluator == "llm":  # the llm_* settings unless its own override them
        asked.setdefault((s.importance_llm_base_url or s.llm_base_url,
                          s.importance_llm_model or s.llm_model,
                          (s.importance_llm_api_key or s.llm_api_key) is not None),
                         []).append("importance")
    return [f"model endpoint {shown_url(url)}, model {model}"
            f"{', with an API key' if key else ''}: asked for {', '.join(uses)}"
            for (url, model, key), uses in asked.items()]


def from_settings(s: Settings) -> ChatModel:
    key = s.llm_api_key.get_secret_value() if s.llm_api_key else None
    return ChatModel(s.llm_base_url, s.llm_model, key, s.llm_timeout_s)
