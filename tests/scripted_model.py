"""A scripted OpenAI-compatible chat completions server for tests (this machine has no model).

``answer`` turns each request's body into the reply's text; ``status`` other than 200 fails the
call; ``stall_s`` holds every answer that long; ``hold()`` holds every answer until ``release()``
(a model that stalls for as long as a test needs). Requests are kept for the tests to read."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedModel:
    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        self.answer = answer
        self.status = 200
        self.stall_s = 0.0
        self.requests: list[dict[str, Any]] = []
        self._open = threading.Event()  # cleared: answers wait for release()
        self._open.set()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                if model.stall_s:
                    time.sleep(model.stall_s)
                model._open.wait()
                if model.status != 200:
                    self.send_response(model.status)
                    self.end_headers()
                    return
                text = model.answer(body)
                out = json.dumps({
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"total_tokens": 100}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the client gave up (a stall)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hold(self) -> None:
        """Answers wait from now on, until ``release``."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.release()  # no handler thread left waiting
        self.server.shutdown()
        self.server.server_close()
