// A memory's relations drawn as a small graph: the memory at the centre, its neighbours around
// it, each a button that opens that neighbour's card.

import type { Memory, RelatedMemory } from "../src/gen/celestial/v1/memory_pb.js";
import { byId, svg } from "./dom.js";
import { fixed, short, zoneName } from "./names.js";

// The memory at the centre, its neighbours one step away on a circle around it; each edge points
// the way its relation does, labelled with its name, and is the thicker the heavier it is.
export function renderGraph(m: Memory, reached: RelatedMemory[], more: boolean, shown: number,
                            open: (id: string) => void): void {
  const g = byId("graph") as unknown as SVGSVGElement;
  const RX = 92, RY = 58, r0 = 14, r1 = 10;
  const defs = svg("defs");
  const arrow = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                                markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
  arrow.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.append(arrow);
  const edges = svg("g", { class: "edges" });
  const nodes = svg("g", { class: "nodes" });
  const n = reached.length;
  reached.forEach((rm, i) => {
    const other = rm.memory;
    const hop = rm.path[0];
    if (!other || !hop) return;
    // Around an ellipse (the view is wider than high), the first up and to the right.
    const a = -Math.PI / 5 + (2 * Math.PI * i) / Math.max(n, 1);
    const ux = Math.cos(a), uy = Math.sin(a);
    const x = RX * ux, y = RY * uy;
    const out = hop.fromId === m.id;  // the relation points from this memory to the other
    const dx = x / Math.hypot(x, y), dy = y / Math.hypot(x, y);  // along the edge
    const line = svg("line", {
      x1: fixed(dx * (r0 + 2), 1), y1: fixed(dy * (r0 + 2), 1),
      x2: fixed(x - dx * (r1 + 2), 1), y2: fixed(y - dy * (r1 + 2), 1),
      class: "edge", "stroke-width": fixed(1 + 2 * hop.weight, 2),
      [out ? "marker-end" : "marker-start"]: "url(#arrow)",
    });
    line.dataset.relation = hop.relation;
    line.dataset.direction = out ? "out" : "in";
    const tip = svg("title");
    tip.textContent = `${hop.relation} (weight ${fixed(hop.weight, 2)})`;
    line.append(tip);
    // The relation's name beside the middle of its edge, off the line.
    const label = svg("text", { x: fixed(x / 2 - dy * 7, 1), y: fixed(y / 2 + dx * 7 + 3, 1),
                                class: "edge-label" });
    label.textContent = hop.relation;
    edges.append(line, label);
    const node = svg("g", { class: `node neighbour zone-${zoneName(other.zone)}`,
                            transform: `translate(${fixed(x, 1)} ${fixed(y, 1)})`,
                            tabindex: 0, role: "button" });
    node.dataset.id = other.id;
    node.dataset.relation = hop.relation;
    node.setAttribute("aria-label", `open: ${short(other.content, 60)}`);
    const title = svg("title");
    title.textContent = `${hop.relation}: ${other.content}`;
    // Its text outside the circle, away from the centre.
    const anchor = ux > 0.35 ? "start" : ux < -0.35 ? "end" : "middle";
    const text = svg("text", {
      x: fixed(ux * (r1 + 4), 1),
      y: fixed(anchor === "middle" ? (uy > 0 ? r1 + 11 : -r1 - 5) : 3, 1),
      class: `node-label ${anchor}` });
    text.textContent = short(other.content, 24);
    node.append(svg("circle", { r: r1 }), title, text);
    node.addEventListener("click", () => open(other.id));
    node.addEventListener("keydown", (ev) => {
      if (ev instanceof KeyboardEvent && (ev.key === "Enter" || ev.key === " ")) {
        ev.preventDefault();
        open(other.id);
      }
    });
    nodes.append(node);
  });
  const centre = svg("g", { class: `node centre zone-${zoneName(m.zone)}` });
  centre.dataset.id = m.id;
  const ctitle = svg("title");
  ctitle.textContent = `this memory: ${m.content}`;
  centre.append(svg("circle", { r: r0 }), ctitle);
  nodes.append(centre);
  g.replaceChildren(defs, edges, nodes);
  byId("graph-note").textContent = n
    ? `This memory at the centre, ${n} related memor${n === 1 ? "y" : "ies"} one step away` +
      `${more ? ` (the first ${shown} shown)` : ""}: click one to open it.`
    : "No relations: Relate links memories, and each memory of a session follows the one before.";
}
