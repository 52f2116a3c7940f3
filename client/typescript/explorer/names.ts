// The explorer's words for the contract's values (zones, ledger events, memory types, score
// terms, error codes) and the formatting of numbers, times and long texts.

import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import {
  MemoryType, Zone, ZoneEventKind, type ScoreBreakdown,
} from "../src/gen/celestial/v1/memory_pb.js";

// Zones innermost first: the order results are grouped in.
export const ZONES: readonly Zone[] = [Zone.CORE, Zone.INNER, Zone.OUTER, Zone.BELT, Zone.CLOUD];
const ZONE_NAMES: Record<Zone, string> = {
  [Zone.UNSPECIFIED]: "unspecified", [Zone.CORE]: "core", [Zone.INNER]: "inner",
  [Zone.OUTER]: "outer", [Zone.BELT]: "belt", [Zone.CLOUD]: "cloud",
};
export const EVENT_NAMES: Record<ZoneEventKind, string> = {
  [ZoneEventKind.UNSPECIFIED]: "unspecified", [ZoneEventKind.CAPACITY]: "capacity",
  [ZoneEventKind.FORGOTTEN]: "forgotten", [ZoneEventKind.RESTORED]: "restored",
  [ZoneEventKind.PURGED]: "purged", [ZoneEventKind.DELETED]: "deleted",
  [ZoneEventKind.MERGED]: "merged", [ZoneEventKind.FEEDBACK_HELPFUL]: "feedback_helpful",
  [ZoneEventKind.FEEDBACK_NOT_HELPFUL]: "feedback_not_helpful",
  [ZoneEventKind.SKIPPED]: "skipped",
};
export const EVENT_TEXT: Record<ZoneEventKind, string> = {
  [ZoneEventKind.UNSPECIFIED]: "event", [ZoneEventKind.CAPACITY]: "evicted (zone over capacity)",
  [ZoneEventKind.FORGOTTEN]: "forgotten (archived)", [ZoneEventKind.RESTORED]: "restored",
  [ZoneEventKind.PURGED]: "purged", [ZoneEventKind.DELETED]: "deleted",
  [ZoneEventKind.MERGED]: "merged into another memory",
  [ZoneEventKind.FEEDBACK_HELPFUL]: "voted helpful",
  [ZoneEventKind.FEEDBACK_NOT_HELPFUL]: "voted not helpful",
  [ZoneEventKind.SKIPPED]: "skipped by the turn policy (archived)",
};
export const TYPE_NAMES: Record<MemoryType, string> = {
  [MemoryType.UNSPECIFIED]: "episode", [MemoryType.FACT]: "fact",
  [MemoryType.PREFERENCE]: "preference", [MemoryType.TRIPLE]: "triple",
  [MemoryType.INSIGHT]: "insight", [MemoryType.EPISODE]: "episode",
};
// What the turn policy's action (a memory's metadata "policy", from Observe) did with the turn.
export function policyLine(action: string, why: string): string {
  const said = why ? ` — ${why}` : "";
  switch (action) {
    case "SAVE": return `kept by the turn policy: SAVE${said}`;
    case "SKIP": return `skipped by the turn policy: SKIP${said}`;
    case "RETRIEVE": return `kept by the turn policy: RETRIEVE (kept)${said}`;
    default: return `turn policy: ${action}${said}`;
  }
}
// The score terms, in the memory function's order, with their letters.
export const TERMS: readonly [keyof Omit<ScoreBreakdown, "$typeName" | "$unknown">, string][] = [
  ["recall", "R"], ["freshness", "F"], ["importance", "A"], ["context", "C"], ["total", "I"],
];
// A search's numbers and a card's differ, and say why: a search scores each memory against its
// query (C), while the card shows the score the memory rests at between recalls.
export const SEARCH_SCORE = "The memory function's score I for this search: the terms R F A C below, " +
  "with C, the context, measured against the query.";
export const RELEVANCE = "How well the memory answers the query: what the results are ranked by.";
export const RESTING_SCORE = "The memory function's score I as of the memory's last write (store, " +
  "recall, update or zone move), with C from its last recall: what places it in its zone. " +
  "A search's score measures C against its own query, so the two differ.";
export const fixed = (x: number, digits = 3): string => x.toFixed(digits);
export const zoneName = (z: Zone): string => ZONE_NAMES[z] ?? `zone ${z}`;
export const title = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

export function when(t: Timestamp | undefined): string {
  if (!t) return "—";
  return timestampDate(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function short(text: string, n: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
}

// "unauthenticated", "invalid_argument"...: the Connect protocol's name of a code.
export function codeName(code: Code): string {
  const name = Code[code] ?? "unknown";
  return name.replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase());
}
