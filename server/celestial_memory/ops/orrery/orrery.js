// The orrery: a tenant's memories as the five zones, Core at the centre to Cloud at the edge.
// It polls /orrery/data and moves each dot to its zone and score, animated (CSS transitions).
"use strict";

const ZONES = ["core", "inner", "outer", "belt", "cloud"];
// Each zone's band, as inner and outer radius in the 800 x 800 view.
const BANDS = { core: [0, 70], inner: [78, 148], outer: [156, 228], belt: [236, 308],
                cloud: [316, 388] };
const params = new URLSearchParams(location.search);
const tenant = params.get("tenant") || "";
const asked = Number(params.get("every"));
const every = Number.isFinite(asked) && asked >= 500 ? asked : 2000;
// The API key stays in the fragment (#key=...): browsers never send that part to a server.
const key = new URLSearchParams(location.hash.slice(1)).get("key");
const NS = "http://www.w3.org/2000/svg";
const dotsLayer = document.getElementById("dots");
const dots = new Map();   // id -> circle

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function drawRings() {
  const rings = document.getElementById("rings");
  for (const zone of ZONES) {
    const [inner, outer] = BANDS[zone];
    rings.appendChild(svg("circle", { class: "ring", r: outer }));
    const label = svg("text", { class: "zone-label", x: 0, y: -outer + 14 });
    label.textContent = zone;
    rings.appendChild(label);
  }
}

// A stable angle per memory, from its id (FNV-1a), so a dot only moves when its place does.
function angleOf(id) {
  let h = 2166136261;
  for (let i = 0; i < id.length; i++) { h ^= id.charCodeAt(i); h = Math.imul(h, 16777619); }
  return ((h >>> 0) / 4294967296) * 2 * Math.PI;
}

function colourOf(importance) {
  const hue = 220 - 220 * Math.min(1, Math.max(0, importance));
  return `hsl(${hue.toFixed(0)}, 80%, 58%)`;
}

function sizeOf(recalls) { return Math.min(11, 2.5 + 1.6 * Math.log2(1 + recalls)); }

function place(memories) {
  // Within a zone, rank by score: the highest nearest the centre.
  const byZone = new Map(ZONES.map((z) => [z, []]));
  for (const m of memories) byZone.get(m.zone).push(m);
  const seen = new Set();
  for (const [zone, list] of byZone) {
    list.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
    const [inner, outer] = BANDS[zone];
    list.forEach((m, i) => {
      const frac = list.length > 1 ? i / (list.length - 1) : 0.5;
      const radius = inner + 6 + frac * (outer - inner - 12);
      const a = angleOf(m.id);
      const x = (radius * Math.cos(a)).toFixed(1), y = (radius * Math.sin(a)).toFixed(1);
      let c = dots.get(m.id);
      if (!c) {
        c = svg("circle", { class: "dot", cx: 0, cy: 0 });
        c.appendChild(document.createElementNS(NS, "title"));
        c.addEventListener("mouseenter", () => show(c.memory));
        dotsLayer.appendChild(c);
        dots.set(m.id, c);
        c.style.transform = `translate(${x}px, ${y}px)`;  // new dots appear in place
      }
      c.memory = m;
      c.dataset.id = m.id;
      c.dataset.zone = m.zone;
      c.setAttribute("r", sizeOf(m.recall_count).toFixed(1));
      c.setAttribute("fill", colourOf(m.importance));
      c.classList.toggle("pinned", m.pinned);
      c.firstChild.textContent = `${m.zone} · ${m.content}`;
      c.style.transform = `translate(${x}px, ${y}px)`;
      seen.add(m.id);
    });
  }
  for (const [id, c] of dots) {
    if (!seen.has(id)) { c.remove(); dots.delete(id); }
  }
}

function show(m) {
  const d = document.getElementById("detail");
  const b = m.breakdown;
  d.replaceChildren();
  const h = document.createElement("h2");
  h.textContent = `${m.zone}${m.pinned ? " · pinned" : ""}`;
  const p = document.createElement("p");
  p.className = "content";
  p.textContent = m.content;   // text, never HTML
  const t = document.createElement("table");
  const rows = [["score", m.score], ["recalls", m.recall_count], ["importance", m.importance],
                ["R (recall)", b.recall], ["F (freshness)", b.freshness],
                ["A (importance)", b.importance], ["C (context)", b.context],
                ["created", new Date(m.created_at * 1000).toISOString().slice(0, 10)],
                ["id", m.id]];
  for (const [k, v] of rows) {
    const tr = t.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = String(v);
  }
  d.append(h, p, t);
}

async function refresh() {
  const err = document.getElementById("error");
  try {
    const r = await fetch(`/orrery/data?tenant=${encodeURIComponent(tenant)}`,
                          { headers: key ? { Authorization: `Bearer ${key}` } : {} });
    const data = await r.json();
    if (!r.ok) throw new Error(data.error || r.statusText);
    err.hidden = true;
    document.getElementById("tenant").textContent = data.tenant || "(default tenant)";
    const counts = ZONES.map((z) => `${z} ${data.zones[z]}`).join(" · ");
    document.getElementById("status").textContent =
      `${data.total} memories: ${counts} · ${data.archived} archived (not drawn) · ` +
      `updated ${new Date().toLocaleTimeString()}`;
    const s = document.getElementById("sampled");
    s.hidden = !data.sampled;
    s.textContent = data.sampled ? `A sample: ${data.memories.length} of ${data.total} memories ` +
      `drawn (at most ${data.max_dots}), each zone in proportion to its count.` : "";
    place(data.memories);
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  } catch (e) {
    err.hidden = false;
    err.textContent = `cannot read the memories: ${e.message}`;
  }
}

// The next poll only once this one is answered: a slow server never piles requests up.
async function poll() {
  await refresh();
  setTimeout(poll, every);
}

drawRings();
poll();
