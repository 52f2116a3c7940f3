// The explorer: an overview of a tenant (Stats, and its newest memories from Recent), search its
// memories (Recall, without reinforcing them), read one memory's card (Get), walk its relations
// (Related), read its history (Ledger), vote on it (Feedback), and, with a key that may write,
// edit, pin, unpin and delete it (Update, Delete), all through the Connect endpoints of the
// page's own origin. Bundled by `npm run build:explorer` into
// server/celestial_memory/api/explorer/explorer.js.
//
// The page's CSP allows its own scripts and styles only: no inline style, no innerHTML; every
// text from the server is set as text. Markers on document.body.dataset count each finished
// load (searches, cards, votes, edits, deletes, stats, errors, steps of Back and Forward, the
// access probe, and loaded for all of them), for tests to wait on.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  MemoryService,
  type UpdateRequestSchema,
  Verdict,
  Zone,
  ZoneEventKind,
  type LedgerResponse,
  type Memory,
  type RecallResult,
  type RelatedResponse,
  type ZoneEvent,
} from "../src/gen/celestial/v1/memory_pb.js";
import { bump, byId, el } from "./dom.js";
import { breakdownList, explainScore, keptOut, renderFacts, renderRelations } from "./card.js";
import { renderGraph } from "./graph.js";
import { renderOverview } from "./overview.js";
import {
  codeName, EVENT_NAMES, EVENT_TEXT, fixed, RELEVANCE, SEARCH_SCORE, short, title, when,
  zoneName, ZONES,
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
  byId("notice").hidden = true;
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

function keepInAddress(replace = false): void {
  const url = new URL(location.href);
  for (const [name, value] of Object.entries(shown)) {
    if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
  }
  if (url.href === location.href) return;
  if (replace) history.replaceState(null, "", url); else history.pushState(null, "", url);
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
    explainScore(current, shown.q);
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
  explainScore(current, "");
}

function markSelected(): void {
  const id = byId("card").dataset.id ?? "";
  for (const li of document.querySelectorAll<HTMLElement>("#results li.result, #newest li")) {
    li.classList.toggle("selected", li.dataset.id === id);
  }
}

// ---- the card (Get, Related, Ledger, Feedback) ----

let cardSeq = 0;
let current: Memory | null = null;  // the memory the card shows

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

/** A card's relations and history read again after a write: the write landed whether or not
 * this read does, so its failure is returned to be shown, not thrown. */
async function aroundAfterWrite(m: Memory): Promise<[Around | null, unknown]> {
  try {
    return [await around(m), null];
  } catch (e) {
    return [null, e];
  }
}

function renderAround(m: Memory, { related, ledger }: Around): void {
  renderGraph(m, related.memories, related.nextPageToken !== "", NEIGHBOURS_PAGE,
              (id) => void openCard(id));
  renderRelations(m, related.memories);
  renderHistory(ledger.events, ledger.nextPageToken !== "");
}

// The card shows this memory (read, voted on or changed): its fields, the note on its score, and
// which changes it allows.
function showMemory(m: Memory): void {
  current = m;
  renderFacts(m);
  explainScore(m, shown.q);
  setTools(m);
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
    showMemory(memory);
    renderAround(memory, rest);
    closeEditing();
    byId("write-status").textContent = "";
    card.dataset.id = memory.id;
    card.hidden = false;
    byId("notice").hidden = true;
    byId("hint").hidden = true;
    const status = byId("feedback-status");
    status.textContent = "";
    delete status.dataset.verdict;
    setVoting(memory);
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
  current = null;
  byId("hint").hidden = false;
  shown.id = "";
  markSelected();
}

function voteButtons(): HTMLButtonElement[] {
  return [byId<HTMLButtonElement>("helpful"), byId<HTMLButtonElement>("not-helpful")];
}

// Whether the card's memory takes a vote, as the server decides it: a live memory does, and so
// does a turn the turn policy kept out of the zones (keptOut: the vote is what the policy learns
// from); any other archived memory is refused ("restore it first"), so its buttons stay
// disabled and a line says why. No memory (the card closed): disabled.
function setVoting(m: Memory | null): void {
  const may = m !== null && (!m.archived || keptOut(m));
  for (const b of voteButtons()) b.disabled = !may;
  const note = byId("vote-note");
  note.textContent = !m || (may && !m.archived) ? ""
    : may ? "Kept out of the zones by the turn policy: a vote rewards that decision (not " +
            "helpful: keeping it out was right) and moves its importance; it stays archived."
    : "Archived: restore it (celestial restore ID) before voting on it.";
  note.dataset.votes = !m ? "" : !may ? "refused" : m.archived ? "kept-out" : "live";
}

async function vote(helpful: boolean): Promise<void> {
  const id = byId("card").dataset.id;
  if (!id) return;
  const seq = cardSeq;
  const status = byId("feedback-status");
  for (const b of voteButtons()) b.disabled = true;
  status.textContent = "sending…";
  try {
    const res = await client.feedback({
      tenant, id, verdict: helpful ? Verdict.HELPFUL : Verdict.NOT_HELPFUL });
    const m = res.memory;
    if (!m) throw new ConnectError("the answer held no memory", Code.Internal);
    const [rest, failed] = await aroundAfterWrite(m);
    if (seq !== cardSeq) {  // another card was opened meanwhile; the vote landed all the same
      status.textContent = "";
      return;
    }
    clearError();
    showMemory(m);
    if (rest) renderAround(m, rest);
    // A turn the turn policy kept out stays in the archive: only its importance moved.
    const where = m.archived ? "still in the archive (the turn policy kept it out of the zones)"
      : `now ${zoneName(m.zone)}, resting score ${fixed(m.score)}`;
    status.textContent = `Recorded: ${helpful ? "helpful" : "not helpful"}. Importance ` +
      `${fixed(res.importanceBefore)} → ${fixed(m.importance)}; ${where}.`;
    status.dataset.verdict = helpful ? "helpful" : "not_helpful";
    status.dataset.importanceBefore = String(res.importanceBefore);
    status.dataset.importance = String(m.importance);
    // The vote moved its importance, so its scores: the lists are read again, not left stale.
    await refreshLists();
    if (failed) showError("Reading the history again", failed);
    bump("votes");
  } catch (e) {
    status.textContent = "";
    refused(e);
    showError("Feedback", e);
  } finally {
    // As the memory the card shows now allows: the one voted on, or one opened meanwhile.
    setVoting(current);
  }
}

// ---- changing a memory (Update, Delete): only with a key that may write ----

// Whether the key may write, asked once when the page opens by an Update that cannot change
// anything: it names no memory that can exist (the nil UUID) and no field. The role is checked
// before the request is read, so a read key is answered permission_denied, and a key that may
// write not_found. Until the answer the controls stay hidden; a read key never sees them. A
// write refused later with permission_denied asks again: the key's role may have been lowered
// meanwhile, or only this memory refused (an immutable one, which only an admin key deletes).
const NO_MEMORY = "00000000-0000-0000-0000-000000000000";

async function probeAccess(): Promise<void> {
  let access: "write" | "read" | "none" = "write";
  try {
    await client.update({ tenant, id: NO_MEMORY });
  } catch (e) {
    const code = ConnectError.from(e).code;
    if (code === Code.PermissionDenied) access = "read";
    else if (code === Code.Unauthenticated) access = "none";
  }
  setAccess(access);
  bump("probes");
}

function setAccess(access: "write" | "read" | "none"): void {
  const may = access === "write";
  byId("write-tools").hidden = !may;
  byId("vote-tools").hidden = !may;
  byId("vote-note").hidden = !may;
  byId("read-only").hidden = access !== "read";
  document.body.dataset.access = access;
  byId("key-state").textContent = (apiKey ? "with an API key" : "no API key") +
    (access === "read" ? " · read only" : "");
  if (!may) closeEditing();
}

// A write answered permission_denied: whether the key may write at all is asked again.
function refused(e: unknown): void {
  if (ConnectError.from(e).code === Code.PermissionDenied) void probeAccess();
}

// What the memory allows: nothing but Delete when it is immutable (an admin key's) or archived.
function setTools(m: Memory): void {
  const frozen = m.immutable || m.archived;
  byId<HTMLButtonElement>("edit").disabled = frozen;
  const pin = byId<HTMLButtonElement>("pin");
  pin.textContent = m.pinned ? "Unpin" : "Pin";
  pin.dataset.pinned = String(m.pinned);
  pin.disabled = frozen;
  byId<HTMLButtonElement>("delete").disabled = false;
  byId("write-note").textContent = m.immutable
    ? "Immutable: it is never edited, pinned or unpinned, and only an admin key deletes it."
    : m.archived ? "Archived: restore it (celestial restore ID) before editing or pinning it." : "";
  byId("delete-confirm").hidden = true;
}

function writeButtons(): HTMLButtonElement[] {
  return ["edit", "pin", "delete", "delete-yes", "edit-save"].map((id) =>
    byId<HTMLButtonElement>(id));
}

function busy(on: boolean): void {
  for (const b of writeButtons()) b.disabled = on;
  if (!on) {
    byId<HTMLButtonElement>("delete-yes").disabled = false;
    byId<HTMLButtonElement>("edit-save").disabled = false;
    if (current) setTools(current);
  }
}

function openEditing(): void {
  if (!current) return;
  byId<HTMLTextAreaElement>("edit-content").value = current.content;
  byId<HTMLInputElement>("edit-importance").value = String(current.importance);
  byId<HTMLInputElement>("edit-tags").value = current.tags.join(", ");
  byId("edit-form").hidden = false;
  byId("card-content").hidden = true;
  byId("write-status").textContent = "";
  byId("edit-content").focus();
}

function closeEditing(): void {
  byId("edit-form").hidden = true;
  byId("card-content").hidden = false;
}

// The lists the page shows (this search's results, or the overview's counts and newest memories)
// read again after a change, so that no score, zone or memory in them is stale.
async function refreshLists(): Promise<void> {
  if (shown.q) await search(shown.q, false); else await loadOverview();
}

type Changes = Omit<MessageInitShape<typeof UpdateRequestSchema>, "tenant" | "id" | "$typeName">;

// One Update of the card's memory; the card shows what it answers, then the lists are read again.
async function change(what: string, changes: Changes, said: (m: Memory) => string): Promise<void> {
  const id = current?.id;
  if (!id) return;
  const seq = cardSeq;
  const status = byId("write-status");
  busy(true);
  status.textContent = "saving…";
  try {
    const { memory: m } = await client.update({ tenant, id, ...changes });
    if (!m) throw new ConnectError("the answer held no memory", Code.Internal);
    const [rest, failed] = await aroundAfterWrite(m);
    if (seq === cardSeq) {  // (another card opened meanwhile: the change landed all the same)
      clearError();
      showMemory(m);
      if (rest) renderAround(m, rest);
      closeEditing();
      status.textContent = said(m);
      status.dataset.done = what;
    } else {
      status.textContent = "";
    }
    await refreshLists();
    if (failed) showError("Reading the relations and history again", failed);
    bump("edits");
  } catch (e) {
    status.textContent = "";
    refused(e);
    showError(what, e);
  } finally {
    busy(false);
  }
}

function saveEdit(): void {
  const m = current;
  if (!m) return;
  const content = byId<HTMLTextAreaElement>("edit-content").value;
  const importance = Number(byId<HTMLInputElement>("edit-importance").value);
  const tags = byId<HTMLInputElement>("edit-tags").value.split(",").map((t) => t.trim())
    .filter((t) => t);
  if (!content.trim()) {
    byId("write-status").textContent = "The content may not be empty: Delete removes a memory.";
    return;
  }
  if (!(importance >= 0 && importance <= 1)) {
    byId("write-status").textContent = "The importance is a number from 0 to 1.";
    return;
  }
  const changes: Changes = {};
  if (content !== m.content) changes.content = content;
  if (importance !== m.importance) changes.importance = importance;
  if (tags.join("\n") !== m.tags.join("\n")) changes.tags = { values: tags };
  if (!Object.keys(changes).length) {
    closeEditing();
    byId("write-status").textContent = "Nothing changed.";
    return;
  }
  const parts = Object.keys(changes).join(", ");
  void change("Saving the memory", changes, (after) =>
    `Saved (${parts}). Now ${zoneName(after.zone)}, resting score ${fixed(after.score)}.`);
}

function togglePin(): void {
  const m = current;
  if (!m) return;
  const pinned = !m.pinned;
  void change(pinned ? "Pinning" : "Unpinning", { pinned }, (after) => pinned
    ? `Pinned: it stays in ${zoneName(after.zone)} and is never forgotten.`
    : "Unpinned: it decays and moves again as its score says.");
}

async function deleteMemory(): Promise<void> {
  const m = current;
  if (!m) return;
  const seq = cardSeq;
  busy(true);
  byId("write-status").textContent = "deleting…";
  try {
    const res = await client.delete({ tenant, id: m.id });
    byId("write-status").textContent = "";
    if (seq === cardSeq) {
      closeCard();
      keepInAddress(true);  // the card is gone: Back should not lead to it
    }
    await refreshLists();
    const box = byId("notice");
    box.textContent = res.deleted
      ? `Deleted for good: “${short(m.content, 80)}” (the ledger keeps a tombstone without its ` +
        "content)."
      : "That memory was already gone.";
    box.dataset.deleted = res.deleted ? m.id : "";
    box.hidden = false;
    bump("deletes");
  } catch (e) {
    byId("write-status").textContent = "";
    refused(e);
    showError("Deleting the memory", e);
  } finally {
    busy(false);
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
  byId("edit").addEventListener("click", openEditing);
  byId("edit-cancel").addEventListener("click", closeEditing);
  byId<HTMLFormElement>("edit-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    saveEdit();
  });
  byId("pin").addEventListener("click", togglePin);
  byId("delete").addEventListener("click", () => { byId("delete-confirm").hidden = false; });
  byId("delete-no").addEventListener("click", () => { byId("delete-confirm").hidden = true; });
  byId("delete-yes").addEventListener("click", () => void deleteMemory());
  byId("not-helpful").addEventListener("click", () => void vote(false));
  // Back and Forward: show what the address says, without adding an entry.
  window.addEventListener("popstate", () => void follow().then(() => bump("steps")));
  // Emptied (by hand, or the box's own clear button): back to the overview.
  input.addEventListener("input", () => { if (!input.value.trim()) clearSearch(); });
  input.addEventListener("search", () => { if (!input.value.trim()) clearSearch(); });
  void probeAccess();
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
