// A small inline SVG chart of one queue's samples (kept by the page, not by laneqd): depth
// (backlog) as a filled area on its own scale, and messages in and acked per second as lines
// on a shared one, over what the page has seen of the last `window_ms`.

const svg_ns = 'http://www.w3.org/2000/svg';

function el(name, attrs) {
  const e = document.createElementNS(svg_ns, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** Per-second rates of `field` between consecutive samples (none across a counter reset). */
export function rates(samples, field) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    const dt = (b.t - a.t) / 1000;
    const d = b[field] - a[field];
    if (dt > 0 && d >= 0) out.push({t: b.t, v: d / dt});
  }
  return out;
}

function points(series, x, y) {
  return series.map(p => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
}

/**
 * An <svg> of `samples` ({t, backlog, enqueued, acked}) over the last `window_ms` before `now`.
 * Its <title> and data-* attributes carry the figures, so a test or a screen reader reads them.
 */
export function chart(samples, {now = Date.now(), window_ms = 5 * 60 * 1000, width = 240,
                                height = 48} = {}) {
  const shown = samples.filter(s => s.t >= now - window_ms);
  // The x axis spans what the page has seen, at least a minute, at most `window_ms`.
  const first = shown.length ? shown[0].t : now;
  const from = Math.max(now - window_ms, Math.min(now - 60 * 1000, first));
  const span_ms = now - from;
  const depth = shown.map(s => ({t: s.t, v: s.backlog}));
  const incoming = rates(shown, 'enqueued');
  const acked = rates(shown, 'acked');
  const depth_max = Math.max(1, ...depth.map(p => p.v));
  const rate_max = Math.max(1, ...incoming.map(p => p.v), ...acked.map(p => p.v));
  const pad = 2;
  const x = t => pad + ((t - from) / span_ms) * (width - 2 * pad);
  const y_of = max => v => height - pad - (v / max) * (height - 2 * pad);
  const svg = el('svg', {width, height, viewBox: `0 0 ${width} ${height}`, class: 'chart',
                         role: 'img', 'data-samples': shown.length,
                         'data-depth-max': depth_max, 'data-rate-max': rate_max.toFixed(2)});
  const last = shown.length ? shown[shown.length - 1] : null;
  const last_in = incoming.length ? incoming[incoming.length - 1].v : 0;
  const last_ack = acked.length ? acked[acked.length - 1].v : 0;
  const title = el('title', {});
  title.textContent = `last ${Math.round(span_ms / 1000)} s: depth ${last ? last.backlog : 0}` +
      ` (max ${depth_max}), in ${last_in.toFixed(1)}/s, acked ${last_ack.toFixed(1)}/s` +
      ` (rate scale max ${rate_max.toFixed(1)}/s)`;
  svg.append(title);
  svg.append(el('rect', {x: 0, y: 0, width, height, class: 'chart-bg'}));
  if (depth.length) {
    const y = y_of(depth_max);
    const top = points(depth, x, y);
    const base = `${x(depth[depth.length - 1].t).toFixed(1)},${height - pad} ` +
                 `${x(depth[0].t).toFixed(1)},${height - pad}`;
    svg.append(el('polygon', {points: `${top} ${base}`, class: 'chart-depth'}));
  }
  const y_rate = y_of(rate_max);
  if (incoming.length) {
    svg.append(el('polyline', {points: points(incoming, x, y_rate), class: 'chart-in'}));
  }
  if (acked.length) {
    svg.append(el('polyline', {points: points(acked, x, y_rate), class: 'chart-acked'}));
  }
  return svg;
}
