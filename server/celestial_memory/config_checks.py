"""The settings' checks across fields (config.py runs them once the fields are read): a model
the model-backed settings need, zones that make sense, TLS files that go together."""

from __future__ import annotations

import itertools
import math
import socket
from typing import Any


def check(s: Any) -> None:
    """Raise ValueError naming what is wrong; fill ``instance_id`` when it is unset. ``s`` is
    config.py's Settings, untyped here so that the two modules do not import each other."""
    if s.importance_evaluator == "llm" and not (
            (s.importance_llm_base_url or s.llm_base_url)
            and (s.importance_llm_model or s.llm_model)):
        raise ValueError("importance_evaluator=llm needs CELESTIAL_LLM_BASE_URL and "
                         "CELESTIAL_LLM_MODEL (or their CELESTIAL_IMPORTANCE_LLM_ forms)")
    if s.extractor == "llm" and not (s.llm_base_url and s.llm_model):
        raise ValueError("extractor=llm needs CELESTIAL_LLM_BASE_URL and CELESTIAL_LLM_MODEL")
    if s.reflect_after and not (s.llm_base_url and s.llm_model):
        raise ValueError("reflect_after needs CELESTIAL_LLM_BASE_URL and CELESTIAL_LLM_MODEL")
    t = s.zone_thresholds
    if len(t) != 4 or any(not math.isfinite(x) for x in t):
        raise ValueError("zone_thresholds needs 4 finite values (core, inner, outer, belt)")
    if any(a <= b for a, b in itertools.pairwise(t)):
        raise ValueError("zone_thresholds must be strictly decreasing")
    c = s.zone_capacities
    if len(c) != 5 or any(x < 0 for x in c):
        raise ValueError("zone_capacities needs 5 values >= 0 (0 = unbounded)")
    w = s.relevance_weights
    if len(w) != 4 or any(not math.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("relevance_weights needs 4 finite values >= 0, not all 0")
    if s.default_recall_limit > s.max_recall_limit:
        raise ValueError("default_recall_limit exceeds max_recall_limit")
    if (s.tls_cert is None) != (s.tls_key is None):
        raise ValueError("tls_cert and tls_key go together")
    if s.tls_client_ca is not None and s.tls_cert is None:
        raise ValueError("tls_client_ca needs tls_cert and tls_key")
    if (s.policy_peer_cert is None) != (s.policy_peer_cert_key is None):
        raise ValueError("policy_peer_cert and policy_peer_cert_key go together")
    if s.policy_peer_cert is not None and s.policy_peer_ca is None:
        raise ValueError("policy_peer_cert needs policy_peer_ca (peers are dialled over TLS)")
    for peer in s.policy_peers:
        host, _, port = peer.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"policy_peers: {peer!r} is not host:port")
    if s.policy_share_epsilon and not s.policy_share_noise:
        raise ValueError("policy_share_epsilon is a budget for noised updates: set "
                         "policy_share_noise too")
    if not s.instance_id:
        s.instance_id = f"{socket.gethostname()}/{s.address}"
