"""Importance from a language model (``CELESTIAL_IMPORTANCE_EVALUATOR=llm``): any
OpenAI-compatible chat completions endpoint rates each new memory in [0, 1].

A Store must not wait on a model for long, nor fail because of one: the texts of one Store or
StoreBatch go in requests of ``CHUNK`` texts, sent at once, and whatever has not answered
within the budget (``CELESTIAL_IMPORTANCE_LLM_BUDGET_MS``), or answered an error, a status
other than 200 or anything but one number in [0, 1] per text, is rated by the rules instead. A
late answer still fills the cache (keyed by a hash of the tenant and the text, bounded), so a
repeat of the text in that tenant gets the model's rating. The content is sent to the
endpoint: point it at a model you trust with your users' memories.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from time import monotonic

import httpx
from celestial_memory.config import Settings
from celestial_memory.domain.importance import ImportanceEvaluator, RuleBasedEvaluator

log = logging.getLogger(__name__)

CHUNK = 16  # texts per request
PROMPT = (
    "You rate how important it is for an assistant to remember a piece of information about "
    "its user or their work, for later conversations. 0 is trivia or small talk, 0.5 a useful "
    "detail, 1 something critical (health, deadlines, identity, commitments, strong "
    "preferences). Each memory below is numbered. Answer with one line per memory, in order, "
    "each 'N: score' with the score a number from 0 to 1, and nothing else."
)
_LINE = re.compile(r"^\s*(\d+)\s*[:.)-]\s*([01](?:\.\d+)?|\.\d+)\s*$")


def parse_scores(answer: str, n: int) -> list[float]:
    """One score per memory from the model's answer, or ValueError."""
    scores: dict[int, float] = {}
    for line in answer.strip().splitlines():
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"not 'N: score': {line[:80]!r}")
        k, v = int(m.group(1)), float(m.group(2))
        if not (1 <= k <= n and 0.0 <= v <= 1.0) or k in scores:
            raise ValueError(f"out of range or repeated: {line[:80]!r}")
        scores[k] = v
    if len(scores) != n:
        raise ValueError(f"{len(scores)} scores for {n} memories")
    return [scores[k] for k in range(1, n + 1)]


class LlmEvaluator:
    def __init__(self, base_url: str, model: str, api_key: str | None, budget_s: float,
                 fallback: ImportanceEvaluator, cache_size: int = 10_000) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model, self._budget, self._fallback = model, budget_s, fallback
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # The budget bounds each request too, so a hung endpoint never holds a worker long.
        self._http = httpx.Client(headers=headers, timeout=budget_s)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="importance-llm")
        self._cache: OrderedDict[str, float] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.requests = 0  # sent, for tests and logs
        self.fallbacks = 0  # texts rated by the rules instead

    @staticmethod
    def _key(tenant: str, text: str) -> str:
        # Per tenant: a shared entry would tell one tenant (by the time a Store takes) that
        # another stored the same text.
        return hashlib.sha256(f"{len(tenant)}:{tenant}{text}".encode()).hexdigest()

    def _ask(self, tenant: str, texts: list[str]) -> list[float]:
        with self._lock:
            self.requests += 1
        body = "\n".join(f"{i}. {' '.join(t.split())}" for i, t in enumerate(texts, 1))
        reply = self._http.post(self._url, json={
            "model": self._model, "temperature": 0,
            "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": body}]})
        reply.raise_for_status()
        scores = parse_scores(str(reply.json()["choices"][0]["message"]["content"]), len(texts))
        with self._lock:
            for t, s in zip(texts, scores, strict=True):
                key = self._key(tenant, t)
                self._cache[key] = s
                self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return scores

    def evaluate(self, content: str) -> float:
        return self.evaluate_many([content])[0]

    def evaluate_many(self, contents: Sequence[str], tenant: str = "") -> list[float]:
        deadline = monotonic() + self._budget
        out: list[float | None] = []
        with self._lock:
            for t in contents:
                hit = self._cache.get(self._key(tenant, t))
                out.append(hit)
        missing = sorted({t for t, v in zip(contents, out, strict=True) if v is None})
        chunks = [missing[i:i + CHUNK] for i in range(0, len(missing), CHUNK)]
        futures = [(chunk, self._pool.submit(self._ask, tenant, chunk)) for chunk in chunks]
        if futures:
            wait([f for _, f in futures], timeout=max(0.0, deadline - monotonic()))
            for _, f in futures:
                f.cancel()  # not started within the budget: never sent, so no queue builds up
        rated: dict[str, float] = {}
        for chunk, f in futures:
            if f.cancelled() or not f.done():
                log.warning("importance model: no answer within %.0f ms; rules instead",
                            self._budget * 1000)
                continue
            if (err := f.exception()) is not None:
                log.warning("importance model failed (%s); rules instead", type(err).__name__)
                continue
            rated.update(zip(chunk, f.result(), strict=True))
        result = []
        for t, v in zip(contents, out, strict=True):
            if v is None:
                v = rated.get(t)
            if v is None:
                with self._lock:
                    self.fallbacks += 1
                v = self._fallback.evaluate(t)
            result.append(v)
        return result

    def close(self) -> None:
        """Stop (the server's shutdown): requests still out are abandoned."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()


def from_settings(s: Settings) -> LlmEvaluator:
    secret = s.importance_llm_api_key or s.llm_api_key
    key = secret.get_secret_value() if secret else None
    return LlmEvaluator(s.importance_llm_base_url or s.llm_base_url,
                        s.importance_llm_model or s.llm_model, key,
                        s.importance_llm_budget_ms / 1000, RuleBasedEvaluator(),
                        s.importance_llm_cache_size)
