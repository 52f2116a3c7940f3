// The overview the page opens on, and shows again when the search is cleared: the tenant's zones
// with their counts (Stats) and its newest memories (Recent), each a button that opens its card.

import type { Memory, StatsResponse } from "../src/gen/celestial/v1/memory_pb.js";
import { byId, el } from "./dom.js";
import { fixed, short, title, when, zoneName } from "./names.js";

export function renderOverview(stats: StatsResponse, newest: Memory[], tenant: string,
                               open: (id: string) => void): void {
  const parts = stats.zones.map((z) => `${zoneName(z.zone)} ${z.count}`);
  // An empty tenant is most often a misspelt name: say so rather than "0 memories".
  const empty = stats.total === 0n && stats.archived === 0n;
  const who = tenant ? `tenant ${tenant}` : "the default tenant";
  const line = byId("overview");
  line.textContent = empty
    ? `${who} holds no memories — check the tenant name`
    : `${stats.total} memories: ${parts.join(" · ")}` +
      ` · ${stats.archived} archived · ${stats.embeddingModel}`;
  line.classList.toggle("empty", empty);
  byId("zones").replaceChildren(...stats.zones.map((z) => {
    const name = zoneName(z.zone);
    return el("li", { class: `zone-count zone-${name}`,
                      data: { zone: name, count: String(z.count) },
                      title: (z.capacity ? `capacity ${z.capacity}` : "no capacity bound") +
                        (z.minScore !== undefined ? `; from score ${fixed(z.minScore)}` : "") },
              el("b", { text: title(name) }), ` ${z.count}`);
  }), el("li", { class: "zone-count archived",
                 data: { zone: "archived", count: String(stats.archived) },
                 title: "forgotten memories, kept in the archive" },
         el("b", { text: "Archived" }), ` ${stats.archived}`));
  const items = newest.map((m) => recentItem(m, open));
  if (!items.length) {
    items.push(el("li", { class: "none", text: empty
      ? `Nothing to show: ${who} holds no memories — check the tenant name.`
      : "No live memories: all of them are in the archive." }));
  }
  byId("newest").replaceChildren(...items);
}

function recentItem(m: Memory, open: (id: string) => void): HTMLElement {
  const button = el("button", { class: "open", text: short(m.content, 160), title: m.content,
                                data: { id: m.id } });
  button.type = "button";
  button.addEventListener("click", () => open(m.id));
  const zone = zoneName(m.zone);
  return el("li", { class: `recent zone-${zone}`, data: { id: m.id, zone } }, button,
            el("p", { class: "meta" }, el("span", { class: "badge", text: title(zone) }),
               el("time", { text: when(m.createdAt) })));
}
