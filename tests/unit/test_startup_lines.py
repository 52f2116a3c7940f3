"""What the start-up log says of the model endpoints: each endpoint once, with its model, the
features that ask it and whether a key goes along, and never the key or a URL's secrets."""

from __future__ import annotations

from celestial_memory.config import Settings
from celestial_memory.understanding.chat import endpoints_in_use, shown_url


def test_a_url_is_shown_without_what_may_be_secret() -> None:
    assert shown_url("https://me:hunter2@llm.example:8443/v1?api_key=k#x") == (
        "https://llm.example:8443/v1")
    assert shown_url("http://localhost:11434/v1") == "http://localhost:11434/v1"


def test_each_endpoint_is_named_with_what_asks_it() -> None:
    assert endpoints_in_use(Settings()) == []
    one = Settings(llm_base_url="http://localhost:11434/v1", llm_model="llama3.2",
                   extractor="llm", importance_evaluator="llm")
    assert endpoints_in_use(one) == [
        "model endpoint http://localhost:11434/v1, model llama3.2: asked for reflection, "
        "entity extraction, importance"]
    two = Settings(llm_base_url="http://localhost:11434/v1", llm_model="llama3.2",
                   llm_api_key="sk-hunter2", importance_evaluator="llm",
                   importance_llm_model="small")
    lines = endpoints_in_use(two)
    assert lines == [
        "model endpoint http://localhost:11434/v1, model llama3.2, with an API key: asked for "
        "reflection",
        "model endpoint http://localhost:11434/v1, model small, with an API key: asked for "
        "importance"]
    assert not any("hunter2" in line for line in lines)
