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
  const labels = svg("g", { class: "edge-labels" });
  const n = reached.length;
  // What a label must not cover: the nodes, the arrowheads, the edges, the other labels.
  const taken: Box[] = [around(0, 0, r0 + 1)];
  const lines: [number, number, number, number][] = [];
  const names: [string, Seg, number][] = [];
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
    const seg: Seg = [dx * (r0 + 2), dy * (r0 + 2), x - dx * (r1 + 2), y - dy * (r1 + 2)];
    const width = 1 + 2 * hop.weight;
    const line = svg("line", {
      x1: fixed(seg[0], 1), y1: fixed(seg[1], 1), x2: fixed(seg[2], 1), y2: fixed(seg[3], 1),
      class: "edge", "stroke-width": fixed(width, 2),
      [out ? "marker-end" : "marker-start"]: "url(#arrow)",
    });
    lines.push(seg);
    taken.push(around(x, y, r1 + 1), arrowBox(seg, out, width));
    line.dataset.relation = hop.relation;
    line.dataset.direction = out ? "out" : "in";
    const tip = svg("title");
    tip.textContent = `${hop.relation} (weight ${fixed(hop.weight, 2)})`;
    line.append(tip);
    names.push([hop.relation, seg, width]);
    edges.append(line);
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
    const tx = ux * (r1 + 4), ty = anchor === "middle" ? (uy > 0 ? r1 + 11 : -r1 - 5) : 3;
    const text = svg("text", { x: fixed(tx, 1), y: fixed(ty, 1), class: `node-label ${anchor}` });
    text.textContent = short(other.content, 24);
    const w = textWidth(text.textContent, NODE_FONT);
    const left = x + tx - (anchor === "start" ? 0 : anchor === "end" ? w : w / 2);
    taken.push({ x0: left, x1: left + w, y0: y + ty - 9, y1: y + ty + 2 });
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
  // Each relation's name whole, on a background, beside its edge where it covers nothing else
  // (labels placed at the middle ran into the arrowheads and one another). The longest first,
  // while there is most room; the graph keeps the edges' order.
  const sized = names.map(([relation, seg, width], i) =>
    ({ relation, seg, width, i, w: textWidth(relation, LABEL_FONT) + 4 }));
  const boxes = new Map<number, Box>();
  for (const { seg, width, i, w } of [...sized].sort((a, b) => b.w - a.w)) {
    const box = place(seg, width, w, 10, taken, lines);
    taken.push(box);
    boxes.set(i, box);
  }
  for (const { relation, i, w } of sized) {
    const box = boxes.get(i)!, h = 10;
    const label = svg("g", { class: "edge-label" });
    label.dataset.relation = relation;
    const text = svg("text", { x: fixed((box.x0 + box.x1) / 2, 1), y: fixed(box.y1 - 2.5, 1) });
    text.textContent = relation;
    label.append(svg("rect", { x: fixed(box.x0, 1), y: fixed(box.y0, 1), width: fixed(w, 1),
                               height: h, rx: 2 }), text);
    labels.append(label);
  }
  g.replaceChildren(defs, edges, nodes, labels);
  byId("graph-note").textContent = n
    ? `This memory at the centre, ${n} related memor${n === 1 ? "y" : "ies"} one step away` +
      `${more ? ` (the first ${shown} shown)` : ""}: click one to open it.`
    : "No relations: Relate links memories, and each memory of a session follows the one before.";
}

type Seg = [number, number, number, number];
interface Box { x0: number; x1: number; y0: number; y1: number }
const VIEW: Box = { x0: -150, x1: 150, y0: -85, y1: 85 };  // the graph's viewBox
const LABEL_FONT = "8px system-ui, sans-serif", NODE_FONT = "9px system-ui, sans-serif";
let ruler: CanvasRenderingContext2D | null = null;

// A text's width in the graph's units, measured before the card is shown (an SVG text measures
// nothing while hidden).
function textWidth(text: string, font: string): number {
  ruler ??= document.createElement("canvas").getContext("2d");
  if (!ruler) return text.length * 5;
  ruler.font = font;
  return ruler.measureText(text).width;
}

const around = (x: number, y: number, r: number): Box =>
  ({ x0: x - r, x1: x + r, y0: y - r, y1: y + r });

// The arrowhead at the end an edge points to: the marker is 6 stroke widths long and wide, its
// tip a tenth of that past the line's end.
function arrowBox([x1, y1, x2, y2]: Seg, out: boolean, width: number): Box {
  const len = Math.hypot(x2 - x1, y2 - y1) || 1;
  const [tx, ty, ux, uy] = out ? [x2, y2, (x1 - x2) / len, (y1 - y2) / len]
                               : [x1, y1, (x2 - x1) / len, (y2 - y1) / len];
  const size = 6 * width;
  return around(tx + ux * size * 0.4, ty + uy * size * 0.4, size / 2 + 1);
}

// From the middle of the edge outwards, either way.
const ALONG = [0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7].map((k) => 0.5 + k * 0.05);

const overlap = (a: Box, b: Box): number =>
  Math.max(0, Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0)) *
  Math.max(0, Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0));

// How much a label's box covers: other boxes (by area), edges (by points along them), and
// whatever falls outside the view.
function cost(box: Box, taken: Box[], lines: Seg[]): number {
  // A node or an arrowhead covered is worse than an edge crossed: the label has a background.
  let c = taken.reduce((sum, t) => sum + 10 * overlap(box, t), 0);
  for (const [x1, y1, x2, y2] of lines) {
    for (let k = 0; k <= 20; k++) {
      const px = x1 + (x2 - x1) * k / 20, py = y1 + (y2 - y1) * k / 20;
      if (px > box.x0 && px < box.x1 && py > box.y0 && py < box.y1) c += 4;
    }
  }
  const inside = overlap(box, VIEW);
  return c + ((box.x1 - box.x0) * (box.y1 - box.y0) - inside) * 4;
}

// Beside the edge, clear of its line: the middle first, then further along either way, on
// either side; the first place that covers nothing, else the one that covers least.
function place(seg: Seg, width: number, w: number, h: number, taken: Box[],
               lines: Seg[]): Box {
  const [x1, y1, x2, y2] = seg;
  const len = Math.hypot(x2 - x1, y2 - y1) || 1;
  const nx = -(y2 - y1) / len, ny = (x2 - x1) / len;  // across the edge
  const off = (Math.abs(nx) * w + Math.abs(ny) * h) / 2 + width / 2 + 1.5;
  let best: Box | null = null, bestCost = Infinity;
  for (const away of [0, 5, 10, 15, 20]) {  // further off the line, when crowded
    for (const t of ALONG) {
      for (const side of [1, -1]) {
        const cx = x1 + (x2 - x1) * t + side * nx * (off + away);
        const cy = y1 + (y2 - y1) * t + side * ny * (off + away);
        const box = { x0: cx - w / 2, x1: cx + w / 2, y0: cy - h / 2, y1: cy + h / 2 };
        const c = cost(box, taken, lines);
        if (c === 0) return box;
        if (c < bestCost) [best, bestCost] = [box, c];
      }
    }
  }
  return best ?? around(x1, y1, 0);
}
