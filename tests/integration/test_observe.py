"""Observe, GetPolicy and ResetPolicy: each phase of the turn policy decides and says why; a
SKIP goes straight into the archive, where Archived lists it, deep recall finds it and Restore
brings it back, and the SKIP is penalised for it; a skipped turn never reaches the model; a
burst of votes moves neither a rule nor the bandit past its bounds; hostile turns are clear
INVALID_ARGUMENTs; the read role only dry-runs. The core scenarios run over gRPC and over
HTTP/JSON. (Restarts, kills and Export/Import: test_observe_durable.py.)"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.policy import FEATURES
from celestial_memory.understanding import llm_importance
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.integration.conftest import TRANSPORTS, running_server, stub_over
from tests.rss import peak_rss_growth
from tests.scripted_model import ScriptedModel

Stub = pb_grpc.MemoryServiceStub
T = "obs"
SAVE, SKIP, RETRIEVE = pb.TURN_ACTION_SAVE, pb.TURN_ACTION_SKIP, pb.TURN_ACTION_RETRIEVE
GREETING = "greeting, thanks or acknowledgement"
IMPORTANT, EXPLICIT = "importance >= 0.7", "explicit ask or secret"
# Turns each rule decides (by policy/rules.py), and plain turns no rule decides.
FACT = "My wife Sarah loves sushi and hates olives"
PLAIN = ["The weather turned cold", "The printer on the third floor jammed again",
         "We painted the fence green over the weekend",
         "The bus came late and the driver apologised"]


@pytest.fixture
async def server(tmp_path: Path, embedder: SentenceTransformerEmbedder,
                 clock: ManualClock) -> AsyncIterator[MemoryServer]:
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv:
        yield srv


@pytest.fixture(params=TRANSPORTS)
async def stub(server: MemoryServer, request: pytest.FixtureRequest) -> AsyncIterator[Stub]:
    """The core scenarios run over gRPC and again over Connect JSON."""
    async with stub_over(request.param, server) as s:
        yield s


async def observe(stub: Stub, text: str, tenant: str = T, **kw: Any) -> pb.ObserveResponse:
    return await stub.Observe(pb.ObserveRequest(tenant=tenant, text=text, **kw))


async def policy(stub: Stub, tenant: str = T) -> pb.GetPolicyResponse:
    return await stub.GetPolicy(pb.GetPolicyRequest(tenant=tenant, last=256))


def counts(p: pb.GetPolicyResponse) -> dict[str, Any]:
    return {"decisions": dict(p.decisions), "phases": dict(p.phases), "kept": p.kept,
            "explored": p.explored, "rewards": p.rewards, "sum": round(p.reward_sum, 9),
            "updates": p.updates, "by_rule": dict(p.reward_by_rule)}


def field_of(err: grpc.aio.AioRpcError) -> str:
    """The field a refusal names (its BadRequest detail)."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, err
    for d in status.details:
        if d.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            d.Unpack(bad)
            return str(bad.field_violations[0].field)
    raise AssertionError(f"no field in {err.details()!r}")


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def stats(stub: Stub, tenant: str = T) -> tuple[int, int]:
    s = await stub.Stats(pb.StatsRequest(tenant=tenant))
    return s.total, s.archived


# -- the phases ------------------------------------------------------------------------------


async def test_each_phase_decides_and_says_why(stub: Stub) -> None:
    # Phase 0 needs something to recall: a question to an empty tenant is no RETRIEVE.
    empty = (await observe(stub, "What is my wife's name?", dry_run=True)).decision
    assert empty.action != RETRIEVE and empty.trace.phase != 0

    # Phase 1 saves the clear cases, each by its rule, into a zone.
    for text, rule in [(FACT, IMPORTANT), ("I usually go hiking on Saturday mornings", IMPORTANT),
                       ("Don't forget that my passport expires in 2027", EXPLICIT),
                       ("기억해 줘: 내 생일은 5월 3일이야", EXPLICIT)]:
        got = await observe(stub, text, session_id="s1")
        d = got.decision
        assert (d.action, d.keep, d.trace.phase, d.trace.rule) == (SAVE, True, 1, rule), text
        assert d.trace.probability == 1.0 and d.id > 0 and not d.dry_run
        assert got.memory.zone != pb.ZONE_UNSPECIFIED and not got.memory.HasField("archived_at")
        assert got.memory.metadata["policy"] == "SAVE" and got.memory.content == text
    # ... and skips greetings and thanks, into the archive.
    for text in ("ok thanks", "Good morning!"):
        d = (await observe(stub, text, session_id="s1")).decision
        assert (d.action, d.keep, d.trace.phase, d.trace.rule) == (SKIP, False, 1, GREETING)

    # Phase 0: a question or a reference back, in English or Korean, now that there is memory.
    for text, rule in [("What is my wife's name?", "question"),
                       ("Do you remember when we talked about my passport?", "refers back"),
                       ("지난번에 얘기했던 여권 만료일이 언제였지?", "refers back")]:
        got = await observe(stub, text, session_id="s2")
        d = got.decision
        assert (d.action, d.trace.phase, d.trace.rule) == (RETRIEVE, 0, rule), text
        assert d.trace.keep_by and got.results and got.context and got.context_tokens > 0
    sarah = await observe(stub, "What food does Sarah love?", session_id="s2")
    assert "Sarah loves sushi" in sarah.context
    assert FACT in [r.memory.content for r in sarah.results]
    # An assistant's own question asks the memory nothing.
    d = (await observe(stub, "What is your wife's name?", role="assistant")).decision
    assert d.action != RETRIEVE and d.trace.phase != 0

    # Phase 2: a plain turn no rule decides goes to the bandit, which says how it weighed it.
    for text in PLAIN[:2]:
        d = (await observe(stub, text, session_id="s3")).decision
        t = d.trace
        assert t.phase == 2 and t.rule == "" and set(t.scores) == {"SAVE", "SKIP"}
        assert 0 < t.probability <= 1 and set(t.features) == set(FEATURES)
        assert all(0 <= v <= 1 for v in t.features.values()) and t.features["bias"] == 1
        assert d.action in (SAVE, SKIP) and d.keep == (d.action == SAVE)

    # GetPolicy counts each decision once, newest first in its log.
    p = await policy(stub)
    assert sum(p.decisions.values()) == 13 == sum(p.phases.values())
    assert p.phases["0"] == 4 and p.phases["1"] == 6 and p.decisions["RETRIEVE"] == 4
    assert [d.id for d in p.last] == list(range(13, 0, -1))
    assert len(p.fingerprint) == 64 and 0 < p.exploration < 1

    # A dry run decides the same way and writes, learns and draws nothing.
    before, before_stats = counts(p), await stats(stub)
    for text, action in [(FACT, SAVE), ("ok thanks", SKIP), ("What is my wife's name?", RETRIEVE),
                         (PLAIN[2], None)]:
        got = await observe(stub, text, dry_run=True, session_id="s4")
        assert got.decision.dry_run and got.decision.id == 0 and not got.HasField("memory")
        assert not got.results and not got.context
        assert action is None or got.decision.action == action
    assert counts(await policy(stub)) == before and await stats(stub) == before_stats


async def test_an_explicit_ask_to_remember_is_saved_not_recalled(server: MemoryServer) -> None:
    # "remember that ..." once read as a reference back: a RETRIEVE by phase 0.
    async with stub_over("grpc", server) as s:
        await observe(s, FACT)
        for text in ("Please remember that my locker code is 4512",
                     "Remember my daughter's school starts at 8:15"):
            d = (await observe(s, text)).decision
            assert (d.action, d.trace.phase, d.trace.rule) == (SAVE, 1, EXPLICIT), text
        d = (await observe(s, "Do you remember when we talked about my locker?")).decision
        assert (d.action, d.trace.rule) == (RETRIEVE, "refers back")


# -- a SKIP: archived, listed, found, restored, penalised ----------------------------------


async def test_a_skipped_turn_is_archived_found_restored_and_its_skip_penalised(
        stub: Stub, clock: ManualClock) -> None:
    assert (await observe(stub, FACT, session_id="seed")).decision.action == SAVE
    total, archived = await stats(stub)
    # Sessions of their own: no later turn of the session rewards the SKIPs (implicitly).
    one = await observe(stub, "ok thanks", session_id="k1")
    two = await observe(stub, "Good morning!", session_id="k2")
    key = f"1:{GREETING}"
    for got in (one, two):
        assert got.decision.action == SKIP and got.created
        m = got.memory
        assert m.archived and m.HasField("archived_at") and m.metadata["policy"] == "SKIP"
        events = (await stub.Ledger(pb.LedgerRequest(tenant=T, memory_id=m.id))).events
        assert [e.kind for e in events] == [pb.ZONE_EVENT_KIND_SKIPPED]
        assert not events[0].HasField("to_zone")
    assert await stats(stub) == (total, archived + 2)  # in no zone
    listed = (await stub.Recent(pb.RecentRequest(tenant=T, archived=True, page_size=100))).memories
    assert {one.memory.id, two.memory.id} <= {m.id for m in listed}  # what `celestial archived` lists
    live = (await stub.List(pb.ListRequest(tenant=T, page_size=100))).memories
    assert not {one.memory.id, two.memory.id} & {m.id for m in live}
    shallow = await stub.Recall(pb.RecallRequest(tenant=T, query="ok thanks", deep=False,
                                                 min_relevance=0.0))
    assert one.memory.id not in {r.memory.id for r in shallow.results}
    p0 = await policy(stub)

    # Restore brings the first back into a zone, and penalises its SKIP.
    clock.advance(60)  # its ledger events at times of their own
    back = (await stub.Restore(pb.RestoreRequest(tenant=T, id=one.memory.id))).memory
    assert back.zone != pb.ZONE_UNSPECIFIED and not back.archived
    assert await stats(stub) == (total + 1, archived + 1)
    kinds = [e.kind for e in (await stub.Ledger(
        pb.LedgerRequest(tenant=T, memory_id=one.memory.id))).events]
    assert kinds == [pb.ZONE_EVENT_KIND_SKIPPED, pb.ZONE_EVENT_KIND_RESTORED]
    p1 = await policy(stub)
    assert p1.rewards == p0.rewards + 1 and p1.updates == p0.updates  # a rule's: counted only
    assert p1.reward_by_rule[key] == pytest.approx(p0.reward_by_rule.get(key, 0.0) - 1.0)
    # A helpful vote on it says the same (the SKIP was wrong): nothing more to credit.
    await stub.Feedback(pb.FeedbackRequest(tenant=T, id=one.memory.id,
                                           verdict=pb.VERDICT_HELPFUL))
    assert counts(await policy(stub)) == counts(p1)

    # Deep recall (the server's default) finds the second in the archive, and penalises it.
    deep = await stub.Recall(pb.RecallRequest(tenant=T, query="Good morning!"))
    assert (two.memory.id, True) in [(r.memory.id, r.archived) for r in deep.results]
    p2 = await policy(stub)
    assert p2.rewards == p1.rewards + 1
    assert p2.reward_by_rule[key] == pytest.approx(p1.reward_by_rule[key] - 1.0)
    # What one decision is credited stays within [-1, 1]: found again, it learns nothing more.
    await stub.Recall(pb.RecallRequest(tenant=T, query="Good morning!", include_archived=True))
    await stub.Restore(pb.RestoreRequest(tenant=T, id=two.memory.id))
    assert counts(await policy(stub)) == counts(p2)
    # The same greeting is still skipped by the same rule: no reward moves a rule.
    d = (await observe(stub, "ok thanks", dry_run=True)).decision
    assert (d.action, d.trace.rule) == (SKIP, GREETING)
    # ResetPolicy drops what was learnt, never a memory; ids go on from the old policy's.
    assert (await stub.ResetPolicy(pb.ResetPolicyRequest(tenant=T))).decisions == 3
    assert counts(await policy(stub)) == counts(pb.GetPolicyResponse(
        decisions={"SAVE": 0, "SKIP": 0, "RETRIEVE": 0}, phases={"0": 0, "1": 0, "2": 0}))
    assert await stats(stub) == (total + 2, archived)
    assert (await observe(stub, "ok thanks")).decision.id == 4


class Explore:
    """The bandit's draws, fixed: always explore, and draw its second arm (SKIP)."""

    def random(self) -> float:
        return 0.0

    def integers(self, k: int) -> int:
        return 1


async def test_a_bandit_skip_found_again_teaches_the_bandit(server: MemoryServer) -> None:
    async with stub_over("grpc", server) as s:
        await observe(s, FACT)
        bandit = server.service.observing.policies.of(T).bandit
        drawn, bandit._rng = bandit._rng, Explore()
        try:
            skipped = await observe(s, PLAIN[0], session_id="b1")
            # A question whose keeping the bandit decides: drawn not to keep, it is archived.
            unkept = await observe(s, "What did the mechanic say about the brakes?",
                                   session_id="b2")
        finally:
            bandit._rng = drawn
        d = skipped.decision
        assert (d.action, d.trace.phase, d.trace.explored) == (SKIP, 2, True)
        assert 0 < d.trace.probability < 0.5 and skipped.memory.archived
        u = unkept.decision
        assert (u.action, u.keep, u.trace.keep_by) == (RETRIEVE, False, "bandit")
        assert unkept.memory.archived and unkept.memory.metadata["policy"] == "RETRIEVE"
        p0 = await policy(s)
        assert p0.explored == 2
        await s.Restore(pb.RestoreRequest(tenant=T, id=skipped.memory.id))
        p1 = await policy(s)
        assert (p1.updates, p1.rewards) == (p0.updates + 1, p0.rewards + 1)
        assert p1.reward_sum == pytest.approx(p0.reward_sum - 1)
        # The turn the RETRIEVE did not keep, needed after all: the bandit's keep learns too.
        await s.Restore(pb.RestoreRequest(tenant=T, id=unkept.memory.id))
        p2 = await policy(s)
        assert (p2.updates, p2.rewards) == (p1.updates + 1, p1.rewards + 1)


# -- the model never sees a skipped turn ------------------------------------------------------


def answers(body: dict[str, Any]) -> str:
    """The importance rater's scores, or the extractor's (empty) understanding."""
    numbered = re.findall(r"^(\d+)\. ", body["messages"][1]["content"], re.M)
    if body["messages"][0]["content"] == llm_importance.PROMPT:
        return "\n".join(f"{n}: 0.5" for n in numbered)
    return json.dumps({"memories": [{"n": int(n), "entities": [], "triples": []}
                                    for n in numbered]})


async def test_a_skipped_turn_is_never_sent_to_the_model_and_a_saved_one_is(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    model = ScriptedModel(answers)
    try:
        async with running_server(tmp_path, embedder, clock, extractor="llm",
                                  importance_evaluator="llm", llm_base_url=model.url,
                                  llm_model="scripted", understand_poll_s=0.05) as srv, \
                stub_over("grpc", srv) as s:
            skipped = await observe(s, "ok thanks, Quentin", session_id="m")
            saved = await observe(s, FACT, session_id="m")
            assert skipped.decision.action == SKIP and saved.decision.action == SAVE
            for _ in range(600):  # the queue runs in the background
                got = (await s.Get(pb.GetRequest(tenant=T, id=saved.memory.id))).memory
                if got.understanding not in ("", "waiting"):
                    break
                await asyncio.sleep(0.05)
            assert got.understanding == "done"
            gone = (await s.Get(pb.GetRequest(tenant=T, id=skipped.memory.id))).memory
            assert gone.archived and gone.understanding == ""
    finally:
        model.close()
    sent = [m["content"] for body in model.requests for m in body["messages"]]
    assert any(FACT in c for c in sent)
    assert not any("Quentin" in c for c in sent), "a skipped turn reached the model"


# -- bounds under a burst of votes ----------------------------------------------------------


async def test_a_burst_of_negative_votes_moves_no_rule_and_keeps_the_bandit_bounded(
        engine_server: tuple[MemoryService, Stub]) -> None:
    service, stub = engine_server
    tenant = "burst"
    rule = await observe(stub, FACT, tenant, session_id="r")
    assert rule.decision.trace.rule == IMPORTANT
    subjects = ["the kettle", "my bike chain", "the garden hose", "the attic window",
                "the car battery", "the oven timer", "the hallway lamp", "the laptop fan",
                "the fridge door", "the washing machine"]
    verbs = ["rattled all night", "stopped working on Tuesday", "needs a new part",
             "was fixed by the neighbour", "made a strange noise"]
    saved: list[str] = []
    for i, (what, did) in enumerate((s, v) for s in subjects for v in verbs):
        got = await observe(stub, f"{what.capitalize()} {did}", tenant, session_id=f"t{i}")
        if got.decision.trace.phase == 2 and got.decision.keep and got.created:
            saved.append(got.memory.id)
    assert len(saved) >= 25
    # 1,000 not-helpful votes: half on the rule's memory, half spread over the bandit's.
    targets = [rule.memory.id] * 500 + [saved[i % len(saved)] for i in range(500)]
    codes: dict[grpc.StatusCode, int] = {}

    async def vote(mid: str) -> None:
        try:
            await stub.Feedback(pb.FeedbackRequest(tenant=tenant, id=mid,
                                                   verdict=pb.VERDICT_NOT_HELPFUL))
            code = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as e:
            code = e.code()
        codes[code] = codes.get(code, 0) + 1

    for start in range(0, len(targets), 50):
        await asyncio.gather(*(vote(m) for m in targets[start:start + 50]))
    assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND,
                          grpc.StatusCode.FAILED_PRECONDITION}, codes
    assert codes.get(grpc.StatusCode.OK, 0) >= 500

    p = await policy(stub, tenant)
    # Each decision's credit is within [-1, 1]; the rule's only counted, never applied.
    assert p.reward_by_rule[f"1:{IMPORTANT}"] >= -1.0 - 1e-9
    assert p.reward_sum >= -sum(p.decisions.values()) - 1e-9
    assert p.updates <= 2 * len(saved) + sum(p.decisions.values())
    # The rules decide as before.
    for text, action, why in [(FACT, SAVE, IMPORTANT), ("ok thanks", SKIP, GREETING)]:
        d = (await observe(stub, text, tenant, dry_run=True)).decision
        assert (d.action, d.trace.phase, d.trace.rule) == (action, 1, why)
    d = (await observe(stub, "ok thanks", tenant)).decision
    assert (d.action, d.trace.rule) == (SKIP, GREETING)
    # The bandit stays within its bounds (policy/bandit.py).
    bandit = service.observing.policies.of(tenant).bandit
    cfg = bandit.config
    assert np.isfinite(bandit.A).all() and np.isfinite(bandit.b).all()
    assert (np.linalg.norm(bandit.theta(), axis=1) <= cfg.max_norm + 1e-9).all()
    eig = np.linalg.eigvalsh(bandit.A)
    assert eig.min() >= cfg.ridge - 1e-6
    assert eig.max() <= cfg.ridge + bandit.dim / (1 - cfg.discount) + 1e-6
    x = np.ones(bandit.dim)
    assert np.abs(bandit.theta() @ x).max() <= bandit.bound(float(np.linalg.norm(x))) + 1e-9
    # What it learnt is a state an Import takes back (within the bounds an Import checks).
    keeper = service.observing.policies
    state = keeper.exported(tenant)
    assert state is not None and keeper.read(state).counters == keeper.of(tenant).counters


# -- hostile turns ---------------------------------------------------------------------------


async def test_hostile_turns_are_refused_by_field(server: MemoryServer) -> None:
    async with stub_over("grpc", server) as s:
        await observe(s, FACT)
        cases: dict[str, tuple[pb.ObserveRequest, str]] = {
            "empty": (pb.ObserveRequest(tenant=T, text=""), "text"),
            "white space": (pb.ObserveRequest(tenant=T, text=" \t\n\u3000 "), "text"),
            "4 MB": (pb.ObserveRequest(tenant=T, text="a" * 4_000_000), "text"),
            "65 previous": (pb.ObserveRequest(tenant=T, text="hi", previous=["x"] * 65),
                            "previous"),
            "long role": (pb.ObserveRequest(tenant=T, text="hi", role="r" * 10_000), "role"),
            "NUL role": (pb.ObserveRequest(tenant=T, text="hi", role="user\x00"), "role"),
            "negative limit": (pb.ObserveRequest(tenant=T, text="What?", limit=-1), "limit"),
            # As a Recall's: a limit past the server's most is refused, not cut.
            "limit past the most": (pb.ObserveRequest(tenant=T, text="hi", limit=100_000),
                                    "limit"),
            "negative budget": (pb.ObserveRequest(tenant=T, text="What?", max_tokens=-5),
                                "max_tokens"),
            # Refused up front, whatever the decision would have been.
            "huge budget": (pb.ObserveRequest(tenant=T, text="What is my wife's name?",
                                              max_tokens=2**31 - 1), "max_tokens"),
            "NUL session": (pb.ObserveRequest(tenant=T, text="hi", session_id="a\x00"),
                            "session_id"),
        }
        before = counts(await policy(s))
        for name, (req, field) in cases.items():
            for dry in (False, True):
                req.dry_run = dry
                err = await refused(s.Observe(req))
                assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, err)
                assert field_of(err) == field and field in err.details(), name
        for last in (-1, 257):
            err = await refused(s.GetPolicy(pb.GetPolicyRequest(tenant=T, last=last)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and field_of(err) == "last"
        # A refused turn is no decision.
        assert counts(await policy(s)) == before
        # NULs and control characters are text like any other: decided and kept as sent.
        odd = "\x00\x01\x02 binary \x7f\x1b[31m \ufeff\x00"
        got = await observe(s, odd)
        assert got.decision.id > 0 and got.memory.content == odd
        # Over HTTP/JSON, a body that is not UTF-8 is refused before it is a turn.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as h:
            reply = await h.post("/celestial.v1.MemoryService/Observe",
                                 content=b'{"tenant": "obs", "text": "\xff\xfe\xc3("}',
                                 headers={"content-type": "application/json"})
            assert reply.status_code == 400 and reply.json()["code"] == "invalid_argument"
        async with stub_over("connect-json", server) as h:
            got = await observe(h, odd, dry_run=True)
            assert got.decision.dry_run
            err = await refused(h.Observe(pb.ObserveRequest(tenant=T, text="hi", limit=-3)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and field_of(err) == "limit"
        assert (await observe(s, "ok thanks")).decision.action == SKIP  # still serving


async def test_sixteen_clients_voting_at_once_are_answered_and_memory_stays_bounded(
        server: MemoryServer) -> None:
    async with stub_over("grpc", server) as s:
        target = (await observe(s, FACT)).memory.id
        other = (await observe(s, PLAIN[0])).memory.id
    codes: dict[str, int] = {}
    total, deadline = [0], time.monotonic() + 5.0

    async def client(n: int) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            c = pb_grpc.MemoryServiceStub(ch)
            while total[0] < 10_000 and time.monotonic() < deadline:
                total[0] += 1
                verdict = pb.VERDICT_HELPFUL if total[0] % 2 else pb.VERDICT_NOT_HELPFUL
                try:
                    await c.Feedback(pb.FeedbackRequest(
                        tenant=T, id=target if n % 2 else other, verdict=verdict), timeout=60)
                    code = "OK"
                except grpc.aio.AioRpcError as e:
                    # Enough not-helpful votes forget a memory: the next vote asks for a
                    # Restore first.
                    assert e.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                        grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.FAILED_PRECONDITION), e
                    assert e.details(), e  # a clear error, never a bare one
                    code = e.code().name
                codes[code] = codes.get(code, 0) + 1

    with peak_rss_growth() as growth:
        await asyncio.gather(*(client(n) for n in range(16)))
    assert sum(codes.values()) == total[0] and codes.get("OK", 0) > 0, codes
    assert growth[0] < 512 * 2**20, f"resident memory grew {growth[0] >> 20} MiB ({codes})"
    async with stub_over("grpc", server) as s:
        assert (await observe(s, "ok thanks")).decision.action == SKIP
        p = await policy(s)
        assert p.reward_sum >= -sum(p.decisions.values()) - 1e-9


# -- roles -----------------------------------------------------------------------------------


def keyed(s: Stub, key: str, method: str, req: Any) -> Any:
    """``s.method(req)`` with ``key``."""
    fn: Callable[..., Any] = getattr(s, method)
    return fn(req, metadata=(("authorization", f"Bearer {key}"),))


async def test_the_read_role_dry_runs_and_reads_the_policy_but_acts_on_nothing(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    keys = tmp_path / "keys.json"
    read = create_key(keys, "a-read", "read", ["a"])[1]
    write = create_key(keys, "a-write", "write", ["a"])[1]
    other = create_key(keys, "b-write", "write", ["b"])[1]
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys,
                              http_address="127.0.0.1:0") as srv:
        for transport in TRANSPORTS:
            async with stub_over(transport, srv) as s:
                turn = pb.ObserveRequest(text=FACT)
                assert (await keyed(s, write, "Observe", turn)).decision.action == SAVE
                dry = pb.ObserveRequest(text=FACT, dry_run=True)
                assert (await keyed(s, read, "Observe", dry)).decision.dry_run
                assert (await keyed(s, read, "GetPolicy", pb.GetPolicyRequest())).decisions["SAVE"] >= 1
                for method, req in [("Observe", turn), ("ResetPolicy", pb.ResetPolicyRequest())]:
                    err = await refused(keyed(s, read, method, req))
                    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, (transport, method)
                for method, req in [("GetPolicy", pb.GetPolicyRequest(tenant="a")),
                                    ("Observe", pb.ObserveRequest(tenant="a", text=FACT,
                                                                  dry_run=True))]:
                    err = await refused(keyed(s, other, method, req))
                    assert err.code() in (grpc.StatusCode.PERMISSION_DENIED,
                                          grpc.StatusCode.NOT_FOUND), (transport, method)
                reset = await keyed(s, write, "ResetPolicy", pb.ResetPolicyRequest())
                assert reset.decisions == 1
                assert sum((await keyed(s, read, "GetPolicy", pb.GetPolicyRequest())
                            ).decisions.values()) == 0
