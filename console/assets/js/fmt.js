// Formatting for display. Integers keep every digit (grouped), so what
// the page shows is the API's number.

const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function int(n) {
  return n === null || n === undefined ? '–' : intFmt.format(n);
}

export function num(n, digits = 1) {
  if (n === null || n === undefined) return '–';
  return new Intl.NumberFormat('en-US', { maximumFractionDigits: digits }).format(n);
}

// duration formats seconds as "850 ms", "12.3 s", "4 min 5 s", "3 h 20 min", "2 d 4 h".
export function duration(sec) {
  if (sec === null || sec === undefined || Number.isNaN(sec)) return '–';
  if (sec < 1) return `${Math.round(sec * 1000)} ms`;
  if (sec < 60) return `${num(sec, 1)} s`;
  const m = Math.floor(sec / 60), s = Math.floor(sec % 60);
  if (m < 60) return s ? `${m} min ${s} s` : `${m} min`;
  const hr = Math.floor(m / 60), mm = m % 60;
  if (hr < 48) return mm ? `${hr} h ${mm} min` : `${hr} h`;
  const d = Math.floor(hr / 24), hh = hr % 24;
  return hh ? `${d} d ${hh} h` : `${d} d`;
}

// ms formats milliseconds compactly: "850 ms", "12.3 s", "4.5 min", "2.1 h".
export function ms(v) {
  if (v === null || v === undefined) return '–';
  if (v < 1000) return `${num(v, v < 10 ? 1 : 0)} ms`;
  if (v < 60000) return `${num(v / 1000, 1)} s`;
  if (v < 3600000) return `${num(v / 60000, 1)} min`;
  return `${num(v / 3600000, 1)} h`;
}

// ago says how long before now t was ("12 s ago"), or how long until it
// is ("in 4 min").
export function ago(t, now = Date.now()) {
  if (!t) return 'never';
  const d = (now - new Date(t).getTime()) / 1000;
  if (Math.abs(d) < 1) return 'just now';
  return d > 0 ? `${duration(d)} ago` : `in ${duration(-d)}`;
}

// utc writes a time as "2026-11-23 10:00:04 UTC".
export function utc(t) {
  if (!t) return '–';
  return new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// escapeBytes shows text with its control characters and the characters
// that spoof text direction or hide (bidi controls, zero-width) as \u
// escapes, so hostile bytes read as what they are.
export function escapeText(s) {
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

// escapeBinary shows bytes that are not UTF-8 (raw_base64): printable
// ASCII as itself, the rest as \xNN.
export function escapeBinary(b64) {
  const bin = atob(b64);
  let out = '';
  for (let i = 0; i < bin.length; i++) {
    const c = bin.charCodeAt(i);
    out += (c >= 0x20 && c < 0x7f) || c === 0x0a ? bin[i] : '\\x' + c.toString(16).padStart(2, '0');
  }
  return out;
}

export function bytesOfBase64(b64) {
  return atob(b64).length;
}
