// Building the DOM without HTML strings: every text, whatever bytes it
// holds, goes in as a text node, so nothing from the API is ever parsed
// as markup. The CSP's Trusted Types would refuse the HTML sinks anyway.

// h returns a new element: attrs sets properties and attributes (class,
// text, dataset, on<event> listeners, anything else as an attribute);
// children are nodes or strings (text), null and false skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k.startsWith('on') || k === 'style') throw new Error(`h: no inline ${k}`); // the CSP forbids them
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and fills it with children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);
