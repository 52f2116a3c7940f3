// A memory's card, every field of it as text: its content and summary, its numbers and times,
// its next move, the facts it states (triples), its metadata, its entities, and its relations
// with their weights (the graph draws them; the list under it says them).

import {
  Zone, type Memory, type RelatedMemory, type ScoreBreakdown,
} from "../src/gen/celestial/v1/memory_pb.js";
import { byId, el } from "./dom.js";
import {
  fixed, policyLine, RESTING_SCORE, short, TERMS, title, TYPE_NAMES, when, zoneName,
} from "./names.js";

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

// Whether the turn policy wrote the memory straight into the archive (a SKIP, or a RETRIEVE that
// did not keep its turn) and it has stayed there since: archived when it was written, never
// restored. The server's rule (policy/decision.py, kept_out), which is why such a memory takes a
// vote (the policy learns from it) while any other archived one must be restored first.
export function keptOut(m: Memory): boolean {
  const a = m.archivedAt, c = m.createdAt;
  return m.archived && Object.hasOwn(m.metadata, "policy") && a !== undefined && c !== undefined
    && a.seconds === c.seconds && a.nanos === c.nanos;
}

// Where the rebalance takes it next, or why nothing is scheduled.
export function nextMoveText(m: Memory): string {
  const next = m.nextMove;
  if (!next) {
    if (m.pinned) return "none: pinned";
    if (m.archived) return "none: archived";
    return "none scheduled";
  }
  const where = next.archive || next.zone === Zone.UNSPECIFIED ? "into the archive (forgotten)"
                                               : `to ${zoneName(next.zone)}`;
  return `${where} at the first rebalance after ${when(next.at)}`;
}

export function breakdownList(b: ScoreBreakdown | undefined): HTMLElement {
  const list = el("dl", { class: "breakdown" });
  for (const [term, letter] of TERMS) {
    const v = b ? b[term] : 0;
    list.append(el("dt", { text: letter, title: term }),
                el("dd", { text: fixed(v), data: { term, value: String(v) }, title: term }));
  }
  return list;
}

export function renderFacts(m: Memory): void {
  const b = m.breakdown;
  byId("card-content").textContent = m.content;
  byId("card-summary").textContent = m.summary && m.summary !== m.content ? m.summary : "";
  const zone = zoneName(m.zone);
  const badge = byId("card-zone");
  badge.textContent = title(zone) + (m.archived ? " · archived" : "") + (m.pinned ? " · pinned" : "")
    + (m.immutable ? " · immutable" : "");
  badge.className = `badge zone-${zone}`;
  const merged = m.merged.length
    ? fact("merged", "repeats merged in", `${m.merged.length}: ` +
        m.merged.map((r) => `“${short(r.content, 60)}” (${when(r.createdAt)})`).join("; "))
    : [];
  byId("card-facts").replaceChildren(
    ...fact("zone", "zone", zone),
    ...fact("score", "resting score I", fixed(m.score), RESTING_SCORE),
    ...fact("importance", "importance A", fixed(m.importance)),
    ...fact("recall-count", "recalls", String(m.recallCount)),
    ...fact("created", "created", when(m.createdAt)),
    ...fact("last-recalled", "last recalled", when(m.lastRecalledAt)),
    ...fact("freshness", "freshness F", b ? fixed(b.freshness) : "—"),
    ...fact("type", "type", TYPE_NAMES[m.memoryType] ?? "episode"),
    ...fact("pinned", "pinned", m.pinned ? "yes" : "no",
            "A pinned memory is never forgotten and does not decay out of its zone."),
    ...fact("immutable", "immutable", m.immutable ? "yes" : "no",
            "An immutable memory is never updated or forgotten; only an admin key deletes it."),
    ...(m.archived ? fact("archived-at", "archived", when(m.archivedAt)) : []),
    ...fact("next-move", "next move", nextMoveText(m),
            "Where the rebalance takes it next unless a recall or an update comes first."),
    ...fact("tags", "tags", m.tags.length ? m.tags.join(", ") : "none"),
    ...(m.sessionId ? fact("session", "session", m.sessionId) : []),
    ...(m.agentId ? fact("agent", "agent", m.agentId) : []),
    ...(m.context ? fact("context", "context", m.context) : []),
    ...(m.understanding ? fact("understanding", "model's reading", m.understanding) : []),
    ...merged,
    ...policyFact(m),
    ...fact("id", "id", m.id),
  );
  byId("card-terms").replaceChildren(breakdownList(b));
  const triples = byId("triples");
  triples.replaceChildren(...m.triples.map((t) =>
    el("li", { class: "triple", data: { subject: t.subject, relation: t.relation,
                                        object: t.object } },
       t.subject, " ", el("b", { text: t.relation }), " ", t.object)));
  if (!m.triples.length) {
    triples.append(el("li", { class: "none", text: "none found (rules find few; a model, " +
      "when the server has one, reads it later)" }));
  }
  const meta = byId("metadata");
  const pairs = Object.entries(m.metadata).sort(([a], [b]) => a.localeCompare(b));
  meta.replaceChildren(...pairs.flatMap(([k, v]) =>
    [el("dt", { text: k }), el("dd", { text: v, data: { key: k } })]));
  if (!pairs.length) meta.append(el("dd", { class: "none", text: "none" }));
  const entities = byId("entities");
  entities.replaceChildren(...m.entities.map((id) => {
    const [kind, ...key] = id.split(":");
    return el("li", { class: `entity kind-${kind}`, data: { entity: id }, title: kind },
              key.join(":") || id);
  }));
  if (!m.entities.length) entities.append(el("li", { class: "none", text: "none found" }));
}

// The graph's edges as text: which way each points, its name, its weight, where it leads, and
// who made it (from the memory's own relations).
export function renderRelations(m: Memory, reached: RelatedMemory[]): void {
  const madeBy = new Map(m.relations.map((r) => [`${r.id} ${r.relation}`, r.madeBy]));
  const list = byId("relations");
  list.replaceChildren(...reached.flatMap((rm) => {
    const other = rm.memory, hop = rm.path[0];
    if (!other || !hop) return [];
    const out = hop.fromId === m.id;
    const by = madeBy.get(`${other.id} ${hop.relation}`);
    return [el("li", { class: "relation", data: { id: other.id, relation: hop.relation,
                                                  weight: String(hop.weight),
                                                  direction: out ? "out" : "in" } },
      `${out ? "→" : "←"} ${hop.relation} `,
      el("span", { class: "weight", text: `weight ${fixed(hop.weight, 2)}` }),
      by ? ` (${by})` : "", ` · ${short(other.content, 70)}`)];
  }));
}

// The card's resting score against the list's score for this search, said in words when the two
// differ (to the three places both show), so that "0.000" beside "0.103" is not a puzzle.
export function explainScore(m: Memory | null, query: string): void {
  const note = byId("score-note");
  const item = m ? document.querySelector<HTMLElement>(
    `#results li.result[data-id="${CSS.escape(m.id)}"]`) : null;
  const inSearch = item ? Number(item.dataset.score) : NaN;
  if (m && item && Number.isFinite(inSearch) && fixed(inSearch) !== fixed(m.score)) {
    const c = Number(item.querySelector<HTMLElement>('dd[data-term="context"]')?.dataset.value);
    note.textContent = `Its score differs in the list: ${fixed(inSearch)} for the search ` +
      `“${query}” against the resting score I ${fixed(m.score)} here. The search measures ` +
      `the context C against its own query` + (Number.isFinite(c) ? ` (C ${fixed(c)})` : "") +
      "; the resting score is the memory function's as of the memory's last write, with C " +
      "from its last recall, and places it in its zone.";
    note.dataset.differs = "yes";
    note.dataset.searchScore = String(inSearch);
  } else {
    note.textContent = "The resting score is the memory function's as of the memory's last " +
      "write, and places it in its zone; a search's score measures the memory against that " +
      "search's query (C), so the two differ.";
    delete note.dataset.differs;
    delete note.dataset.searchScore;
  }
}
