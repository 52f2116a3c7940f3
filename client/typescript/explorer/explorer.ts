// The explorer: an overview of a tenant (Stats, and its newest memories from Recent), search its
// memories (Recall, without reinforcing them), read one memory's card (Get), walk its relations
// (Related), read its history (Ledger) and vote on it (Feedback), all through the Connect
// endpoints of the page's own origin. Bundled by `npm run build:explorer` into
// server/celestial_memory/api/explorer/explorer.js.
//
// The page's CSP allows its own scripts and styles only: no inline style, no innerHTML; every
// text from the server is set as text. Markers on document.body.dataset count each finished
// load (searches, cards, votes, stats, errors, steps of Back and Forward, and loaded for all of
// them), for tests to wait on.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  MemoryService,
  Verdict,
  Zone,
  ZoneEventKind,
  type LedgerResponse,
  type Memory,
  type RecallResult,
  type RelatedResponse,
  type ScoreBreakdown,
  type ZoneEvent,
} from "../src/gen/celestial/v1/memory_pb.js";
import { bump, byId, el } from "./dom.js";
import { renderGraph } from "./graph.js";
import { renderOverview } from "./overview.js";
import {
  codeName, EVENT_NAMES, EVENT_TEXT, fixed, policyLine, RELEVANCE, RESTING_SCORE, SEARCH_SCORE,
  short, TERMS, title, TYPE_NAMES, when, zoneName, ZONES,
} from "./names.js";

const HISTORY_PAGE = 100;
const NEIGHBOURS_PAGE = 24;
const NEWEST = 10;
const tenant = new URLSearchParams(location.search).get("tenant") ?? "";
// The API key stays in the fragment (#key=...): browsers never send that part to a server.
const apiKey = new URLSearchParams(location.hash.slice(1)).get("key") ?? "";

const withKey: Interceptor = (next) => async (req) => {
  if (apiKey) req.header.set("Authorization", `Bearer ${apiKey}`);
  return next(req);
};
const client = createClient(MemoryService, createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: false,
  interceptors: [withKey],
  jsonOptions: { ignoreUnknownFields: true },
  defaultTimeoutMs: 60_000,
}));

// ---- errors: always shown as text ----

function showError(what: string, e: unknown): void {
  const err = ConnectError.from(e);
  const box = byId("error");
  const code = codeName(err.code);
  box.textContent = `${what} failed: ${code}: ${err.rawMessage}`;
  if (err.code === Code.Unauthenticated) {
    box.textContent += " (open the page with #key=<API key> at the end of its address)";
  }
  box.dataset.code = code;
  box.hidden = false;
  document.body.dataset.error = code;
  bump("errors");
}

function clearError(): void {
  const box = byId("error");
  box.hidden = true;
  box.textContent = "";
  delete box.dataset.code;
  delete document.body.dataset.error;
}

// What is shown is in the address (?q= the search, ?id= the card): each step the reader takes is
// a history entry of its own, so that Back and Forward walk through them within the page. The
// fragment (the key) is carried along as it is, and stays out of every request. A step Back or
// Forward (or the first load) follows the address, and so leaves it as it is.
const shown = { q: "", id: "" };

function keepInAddress(): void {
  const url = new URL(location.href);
  for (const [name, value] of Object.entries(shown)) {
    if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
  }
  if (url.href !== location.href) history.pushState(null, "", url);
}

// ---- the overview: the tenant's zones (Stats) and its newest memories (Recent) ----

// Shown until a search, and again when the search is cleared. Recent reinforces nothing either.
async function loadOverview(): Promise<void> {
  try {
    const [stats, recent] = await Promise.all([
      client.stats({ tenant }), client.recent({ tenant, pageSize: NEWEST })]);
    renderOverview(stats, recent.memories, tenant, (id) => void openCard(id));
    markSelected();
    bump("stats");
  } catch (e) {
    byId("overview").textContent = "";
    showError("Reading the tenant's zones", e);
  }
}

// The search box emptied: the overview again, as a step of its own.
function clearSearch(): void {
  if (!shown.q) return;
  clearResults();
  keepInAddress();
  void loadOverview();
}

// ---- search (Recall, no reinforcement) ----

let searchSeq = 0;
const SUMMARY = "Results come grouped by zone, Core first. Searching reinforces nothing.";

function breakdownList(b: ScoreBreakdown | undefined): HTMLElement {
  const list = el("dl", { class: "breakdown" });
  for (const [term, letter] of TERMS) {
    const v = b ? b[term] : 0;
    list.append(el("dt", { text: letter, title: term }),
                el("dd", { text: fixed(v), data: { term, value: String(v) }, title: term }));
  }
  return list;
}

function resultItem(r: RecallResult): HTMLElement | null {
  const m = r.memory;
  if (!m) return null;
  const total = r.breakdown?.total ?? 0;
  const open = el("button", { class: "open", text: short(m.content, 160), title: m.content,
                              data: { id: m.id } });
  open.type = "button";
  open.addEventListener("click", () => void openCard(m.id));
  const meta = el("p", { class: "meta" },
    el("span", { class: "score", text: `score for this search ${fixed(total)}`,
                 data: { value: String(total) }, title: SEARCH_SCORE }),
    el("span", { class: "relevance", text: `relevance ${fixed(r.relevance)}`,
                 data: { value: String(r.relevance) }, title: RELEVANCE }));
  if (r.archived) meta.append(el("span", { class: "archived", text: "archived" }));
  if (r.via) {
    meta.append(el("span", { class: "via",
      text: `via ${r.via.relation} from ${short(r.via.fromId, 9)} (${r.via.hops} step)` }));
  }
  return el("li", { class: "result", data: { id: m.id, zone: zoneName(r.foundIn),
                                             score: String(total) } },
            open, meta, breakdownList(r.breakdown));
}

async function search(query: string, push = true): Promise<void> {
  const seq = ++searchSeq;
  const limit = Number(byId<HTMLSelectElement>("limit").value) || 20;
  const box = byId("results");
  box.setAttribute("aria-busy", "true");
  try {
    const res = await client.recall({ tenant, query, limit, noReinforce: true });
    if (seq !== searchSeq) return;  // a newer search is under way
    clearError();
    shown.q = query;
    if (push) keepInAddress();
    const groups = new Map<Zone, RecallResult[]>(ZONES.map((z) => [z, []]));
    for (const r of res.results) groups.get(r.foundIn)?.push(r);
    const sections: HTMLElement[] = [];
    for (const [zone, list] of groups) {
      if (!list.length) continue;
      const name = zoneName(zone);
      const items = list.map(resultItem).filter((x): x is HTMLElement => x !== null);
      sections.push(el("section", { class: `zone zone-${name}`, data: { zone: name } },
        el("h2", { text: `${title(name)} · ${list.length}` }), el("ol", {}, ...items)));
    }
    box.replaceChildren(...sections);
    byId("summary").textContent = res.results.length
      ? `${res.results.length} memories for “${query}” (not reinforced: this search changes nothing)`
      : `Nothing found for “${query}”.`;
    box.dataset.count = String(res.results.length);
    byId("home").hidden = true;
    markSelected();
    bump("searches");
  } catch (e) {
    if (seq === searchSeq) showError("Search", e);
  } finally {
    if (seq === searchSeq) box.removeAttribute("aria-busy");
  }
}

function clearResults(): void {
  searchSeq++;  // a search still under way is not shown
  const box = byId("results");
  box.replaceChildren();
  box.removeAttribute("aria-busy");
  delete box.dataset.count;
  byId("summary").textContent = SUMMARY;
  byId("home").hidden = false;
  shown.q = "";
}

function markSelected(): void {
  const id = byId("card").dataset.id ?? "";
  for (const li of document.querySelectorAll<HTMLElement>("#results li.result, #newest li")) {
    li.classList.toggle("selected", li.dataset.id === id);
  }
}

// ---- the card (Get, Related, Ledger, Feedback) ----

let cardSeq = 0;

function fact(name: string, label: string, value: string, title = ""): HTMLElement[] {
  return [el("dt", { text: label, title }), el("dd", { text: value, data: { field: name }, title })];
}

// A turn Observe saved or skipped: what the turn policy did with it and why (its metadata, which
// the page shows as text like everything else the server sends).
function policyFact(m: Memory): HTMLElement[] {
  const action = m.metadata["policy"];
  if (!action) return [];
  const why = m.metadata["policy_why"] ?? "";
  const decision = m.metadata["policy_decision"] ?? "";
  return [el("dt", { text: "turn policy" }),
          el("dd", { text: policyLine(action, why),
                     title: decision ? `decision ${decision} of the tenant's turn policy` : "",
                     data: { field: "policy", action, why, decision } })];
}

function renderFacts(m: Memory): void {
  const b = m.breakdown;
  byId("card-content").textContent = m.content;
  const zone = zoneName(m.zone);
  const badge = byId("card-zone");
  badge.textContent = title(zone) + (m.archived ? " · archived" : "") + (m.pinned ? " · pinned" : "");
  badge.className = `badge zone-${zone}`;
  byId("card-facts").replaceChildren(
    ...fact("zone", "zone", zone),
    ...fact("score", "resting score I", fixed(m.score), RESTING_SCORE),
    ...fact("importance", "importance A", fixed(m.importance)),
    ...fact("recall-count", "recalls", String(m.recallCount)),
    ...fact("created", "created", when(m.createdAt)),
    ...fact("last-recalled", "last recalled", when(m.lastRecalledAt)),
    ...fact("freshness", "freshness F", b ? fixed(b.freshness) : "—"),
    ...fact("type", "type", TYPE_NAMES[m.memoryType] ?? "episode"),
    ...(m.tags.length ? fact("tags", "tags", m.tags.join(", ")) : []),
    ...policyFact(m),
    ...fact("id", "id", m.id),
  );
  const entities = byId("entities");
  entities.replaceChildren(...m.entities.map((id) => {
    const [kind, ...key] = id.split(":");
    return el("li", { class: `entity kind-${kind}`, data: { entity: id }, title: kind },
              key.join(":") || id);
  }));
  if (!m.entities.length) entities.append(el("li", { class: "none", text: "none found" }));
}

function renderHistory(events: ZoneEvent[], more: boolean): void {
  const list = byId("history");
  list.replaceChildren(...events.map((ev) => {
    const move = ev.toZone !== undefined && ev.toZone !== ev.fromZone
      ? `${zoneName(ev.fromZone)} → ${zoneName(ev.toZone)}`
      : zoneName(ev.toZone ?? ev.fromZone);
    return el("li", { class: "event", data: { kind: EVENT_NAMES[ev.kind] ?? String(ev.kind),
                                              id: ev.id } },
      el("time", { text: when(ev.at) }), ` ${EVENT_TEXT[ev.kind] ?? "event"} · ${move}`);
  }));
  if (!events.length) {
    list.append(el("li", { class: "none", text: "No events yet. The ledger records evictions, " +
      "forgetting, restores, merges, feedback and the turn policy's skips, not stores or " +
      "recalls." }));
  }
  if (more) list.append(el("li", { class: "none", text: `(the first ${HISTORY_PAGE} events)` }));
  const helpful = events.filter((e) => e.kind === ZoneEventKind.FEEDBACK_HELPFUL).length;
  const unhelpful = events.filter((e) => e.kind === ZoneEventKind.FEEDBACK_NOT_HELPFUL).length;
  const votes = byId("votes");
  votes.textContent = `votes so far: ${helpful} helpful · ${unhelpful} not helpful`;
  votes.dataset.helpful = String(helpful);
  votes.dataset.notHelpful = String(unhelpful);
}

interface Around { related: RelatedResponse; ledger: LedgerResponse }

// A memory's neighbours and history, read together; shown only once both arrived.
async function around(m: Memory): Promise<Around> {
  const [related, ledger] = await Promise.all([
    client.related({ tenant, id: m.id, depth: 1, pageSize: NEIGHBOURS_PAGE }),
    client.ledger({ tenant, memoryId: m.id, pageSize: HISTORY_PAGE }),
  ]);
  return { related, ledger };
}

function renderAround(m: Memory, { related, ledger }: Around): void {
  renderGraph(m, related.memories, related.nextPageToken !== "", NEIGHBOURS_PAGE,
              (id) => void openCard(id));
  renderHistory(ledger.events, ledger.nextPageToken !== "");
}

async function openCard(id: string, push = true): Promise<void> {
  const seq = ++cardSeq;
  const card = byId("card");
  card.setAttribute("aria-busy", "true");
  try {
    // Everything is read before anything is shown: a failed read leaves the card as it was.
    const { memory } = await client.get({ tenant, id });
    if (!memory) throw new ConnectError("the answer held no memory", Code.Internal);
    const rest = await around(memory);
    if (seq !== cardSeq) return;  // another card was asked for meanwhile
    clearError();
    renderFacts(memory);
    renderAround(memory, rest);
    card.dataset.id = memory.id;
    card.hidden = false;
    byId("hint").hidden = true;
    const status = byId("feedback-status");
    status.textContent = "";
    delete status.dataset.verdict;
    for (const b of voteButtons()) b.disabled = memory.archived;
    shown.id = memory.id;
    if (push) keepInAddress();
    markSelected();
    bump("cards");
  } catch (e) {
    if (seq === cardSeq) showError("Opening the memory", e);
  } finally {
    if (seq === cardSeq) card.removeAttribute("aria-busy");
  }
}

function closeCard(): void {
  cardSeq++;  // a card still loading is not shown
  const card = byId("card");
  card.hidden = true;
  delete card.dataset.id;
  byId("hint").hidden = false;
  shown.id = "";
  markSelected();
}

function voteButtons(): HTMLButtonElement[] {
  return [byId<HTMLButtonElement>("helpful"), byId<HTMLButtonElement>("not-helpful")];
}

async function vote(helpful: boolean): Promise<void> {
  const id = byId("card").dataset.id;
  if (!id) return;
  const seq = cardSeq;
  const status = byId("feedback-status");
  for (const b of voteButtons()) b.disabled = true;
  status.textContent = "sending…";
  let archived = false;
  try {
    const res = await client.feedback({
      tenant, id, verdict: helpful ? Verdict.HELPFUL : Verdict.NOT_HELPFUL });
    const m = res.memory;
    if (!m) throw new ConnectError("the answer held no memory", Code.Internal);
    archived = m.archived;
    let rest: Around | null = null;
    let failed: unknown = null;
    try {
      rest = await around(m);
    } catch (e) {
      failed = e;
    }
    if (seq !== cardSeq) {  // another card was opened meanwhile; the vote landed all the same
      status.textContent = "";
      return;
    }
    clearError();
    renderFacts(m);
    if (rest) renderAround(m, rest);
    status.textContent = `Recorded: ${helpful ? "helpful" : "not helpful"}. Importance ` +
      `${fixed(res.importanceBefore)} → ${fixed(m.importance)}; now ${zoneName(m.zone)}, ` +
      `resting score ${fixed(m.score)}.`;
    status.dataset.verdict = helpful ? "helpful" : "not_helpful";
    status.dataset.importanceBefore = String(res.importanceBefore);
    status.dataset.importance = String(m.importance);
    if (failed) showError("Reading the history again", failed);
    bump("votes");
  } catch (e) {
    status.textContent = "";
    showError("Feedback", e);
  } finally {
    // (An archived memory is refused a vote; a card opened meanwhile set its own buttons.)
    for (const b of voteButtons()) b.disabled = archived && seq === cardSeq;
  }
}

// ---- wiring ----

function start(): void {
  byId("tenant").textContent = tenant || "(default tenant)";
  byId("key-state").textContent = apiKey ? "with an API key" : "no API key";
  const form = byId<HTMLFormElement>("search-form");
  const input = byId<HTMLInputElement>("query");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = input.value.trim();
    if (q) void search(q);
  });
  // A key added to the address (#key=...) changes only the fragment, which loads nothing: load
  // the page again so that it takes effect.
  window.addEventListener("hashchange", () => location.reload());
  byId("helpful").addEventListener("click", () => void vote(true));
  byId("not-helpful").addEventListener("click", () => void vote(false));
  // Back and Forward: show what the address says, without adding an entry.
  window.addEventListener("popstate", () => void follow().then(() => bump("steps")));
  // Emptied (by hand, or the box's own clear button): back to the overview.
  input.addEventListener("input", () => { if (!input.value.trim()) clearSearch(); });
  input.addEventListener("search", () => { if (!input.value.trim()) clearSearch(); });
  void loadOverview();
  void follow();
}

// Brings the page to its address: the search and the card it names, each only if it changed.
async function follow(): Promise<void> {
  const now = new URLSearchParams(location.search);
  const q = now.get("q") ?? "", id = now.get("id") ?? "";
  const steps: Promise<void>[] = [];
  if (q !== shown.q) {
    byId<HTMLInputElement>("query").value = q;
    if (q) steps.push(search(q, false));
    else {
      clearResults();
      steps.push(loadOverview());
    }
  }
  if (id !== shown.id) {
    if (id) steps.push(openCard(id, false)); else closeCard();
  }
  await Promise.all(steps);
}

start();
