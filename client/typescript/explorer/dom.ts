// Building the page: elements with text only (never HTML, which the page's CSP and its
// readers' safety both rule out), SVG elements, and the load markers tests wait on.

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

export type Attrs = { class?: string; data?: Record<string, string>; text?: string; title?: string };

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {},
  ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (attrs.class) e.className = attrs.class;
  if (attrs.title) e.title = attrs.title;
  for (const [k, v] of Object.entries(attrs.data ?? {})) e.dataset[k] = v;
  if (attrs.text !== undefined) e.textContent = attrs.text;
  e.append(...children);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag: string, attrs: Record<string, string | number> = {}): SVGElement {
  const e = document.createElementNS(SVG, tag) as SVGElement;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

export function bump(marker: string): void {
  const data = document.body.dataset;
  data[marker] = String(Number(data[marker] ?? 0) + 1);
  data.loaded = String(Number(data.loaded ?? 0) + 1);
}
