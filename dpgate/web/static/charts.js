// dpgate web: charts drawn with Observable Plot (SVG), from the package's own copy.
"use strict";

const dpCharts = (() => {
  // Plot puts its default rules in a <style> element, which the page's CSP forbids: app.css has them.
  function mount(node) {
    node.querySelectorAll("style").forEach((s) => s.remove());
    return node;
  }

  // Plot.plot with the page's type size (set through the CSSOM, which the CSP allows).
  function plot(options) { return mount(Plot.plot({ style: { fontSize: "12px" }, ...options })); }

  const TEMPORAL = /^(DATE|TIMESTAMP)/i;
  const NUMERIC = /(INT|DOUBLE|FLOAT|DECIMAL|REAL|NUMERIC)/i;

  function asDate(v) { return typeof v === "string" ? new Date(v.length === 10 ? v + "T00:00:00Z" : v) : v; }

  // The answer's noisy columns (those with intervals) and the columns that key its rows.
  function shape(env) {
    const ivs = env.intervals || [];
    const noisy = env.columns.filter((c) => ivs.some((iv) => iv && iv[c] && iv[c][0] !== null));
    const keys = env.columns.filter((c) => !noisy.includes(c) && !/_ci_(low|high)$/.test(c));
    return { noisy, keys };
  }

  // One chart per noisy numeric column (at most four): bars or points with whiskers, a line for dates.
  function answer(env) {
    if (!env.rows.length || !env.intervals || !env.intervals.length) return [];
    const { noisy, keys } = shape(env);
    const at = (c) => env.columns.indexOf(c);
    const level = env.cost ? Math.round(100 * env.cost.confidence) : 95;
    const out = [];
    for (const col of noisy.slice(0, 4)) {
      const j = at(col);
      const data = env.rows.map((r, i) => {
        const iv = (env.intervals[i] || {})[col] || [null, null];
        return { key: keys.map((k) => fmt(r[at(k)])).join(" · ") || col, raw: keys.length ? r[at(keys[0])] : null,
                 value: r[j], lo: iv[0], hi: iv[1] };
      }).filter((d) => typeof d.value === "number" && typeof d.lo === "number" && typeof d.hi === "number");
      if (!data.length) continue;
      const keyType = keys.length === 1 ? env.types[at(keys[0])] : "";
      const caption = `${col}: the answer and its ${level}% interval (whiskers)`;
      let chart;
      if (TEMPORAL.test(keyType) && data.length > 1) {
        data.forEach((d) => { d.x = asDate(d.raw); });
        data.sort((a, b) => a.x - b.x);
        chart = plot({
          height: 260, marginLeft: 60, x: { label: keys[0], type: "utc" }, y: { label: col, grid: true },
          caption,
          marks: [
            Plot.areaY(data, { x: "x", y1: "lo", y2: "hi", fill: "#2f5bd3", fillOpacity: 0.12 }),
            Plot.ruleX(data, { x: "x", y1: "lo", y2: "hi", stroke: "#2f5bd3", strokeOpacity: 0.6, className: "dp-whisker" }),
            Plot.line(data, { x: "x", y: "value", stroke: "#2f5bd3", className: "dp-line" }),
            Plot.dot(data, { x: "x", y: "value", fill: "#2f5bd3", r: 2.5, title: (d) => `${d.key}: ${fmt(d.value)} [${fmt(d.lo)}, ${fmt(d.hi)}]` }),
          ],
        });
      } else if (keys.length === 1 && NUMERIC.test(keyType) && data.length > 40) {
        chart = plot({
          height: 260, marginLeft: 60, x: { label: keys[0] }, y: { label: col, grid: true }, caption,
          marks: [
            Plot.ruleX(data, { x: "raw", y1: "lo", y2: "hi", stroke: "#2f5bd3", strokeOpacity: 0.6, className: "dp-whisker" }),
            Plot.dot(data, { x: "raw", y: "value", fill: "#2f5bd3", r: 2.5 }),
          ],
        });
      } else {
        const hi = Math.max(...data.map((d) => d.hi)), lo = Math.min(...data.map((d) => d.lo));
        // bars when the values reach down to zero (counts, sums); points when they sit far from it (means)
        const bars = lo <= 0.25 * hi;
        const labels = data.map((d) => d.key);
        const longest = Math.max(...labels.map((s) => s.length));
        chart = plot({
          height: Math.max(90, 26 * data.length + 40), marginLeft: Math.min(220, 12 + 7 * longest),
          x: { label: col, grid: true, nice: true, ...(bars ? {} : { zero: false }) },
          y: { label: null, domain: labels }, caption,
          marks: [
            bars ? Plot.barX(data, { x: "value", y: "key", fill: "#9db2ea", className: "dp-bar" }) : null,
            Plot.ruleY(data, { y: "key", x1: "lo", x2: "hi", stroke: "#1d2330", strokeWidth: 1.5, className: "dp-whisker" }),
            Plot.tickX(data, { y: "key", x: "lo", stroke: "#1d2330" }),
            Plot.tickX(data, { y: "key", x: "hi", stroke: "#1d2330" }),
            Plot.dot(data, { x: "value", y: "key", fill: "#1d2330", r: 3, className: "dp-estimate",
              title: (d) => `${d.key}: ${fmt(d.value)} [${fmt(d.lo)}, ${fmt(d.hi)}]` }),
            bars ? Plot.ruleX([0]) : null,
          ],
        });
      }
      out.push(chart);
    }
    return out;
  }

  // The owner's charts ----------------------------------------------------------------------------------
  function spending(timeline, analysts, width) {
    const points = timeline.rows.map(([analyst, at, spent]) => ({ analyst, at: asDate(at), spent }));
    if (!points.length) return null;
    const names = [...new Set(points.map((p) => p.analyst))];
    const quotas = analysts.rows.filter((r) => names.includes(r[0])).map((r) => ({ analyst: r[0], quota: r[1] }));
    const last = names.map((n) => points.filter((p) => p.analyst === n).at(-1));
    return plot({
      width: Math.max(480, Math.min(width || 900, 1100)), height: 280, marginLeft: 50, marginRight: 90,
      x: { type: "utc", label: "time" },
      y: { label: "ε spent", grid: true, zero: true }, color: { legend: true, domain: names },
      marks: [
        Plot.ruleY(quotas, { y: "quota", stroke: "analyst", strokeDasharray: "4,3", strokeOpacity: 0.7 }),
        Plot.line(points, { x: "at", y: "spent", stroke: "analyst", curve: "step-after", className: "dp-spending" }),
        Plot.dot(last, { x: "at", y: "spent", fill: "analyst", r: 3 }),
        Plot.text(last, { x: "at", y: "spent", text: (d) => `${d.analyst} ${fmtEpsilon(d.spent)}`, dx: 6, textAnchor: "start" }),
      ],
    });
  }

  function histogram(h) {
    const bins = h.bins.map(([x1, x2, n]) => ({ x1, x2, n }));
    return plot({
      height: 200, marginLeft: 55,
      title: `${h.table} — ${h.subjects.toLocaleString("en-US")} subjects (${h.unit})`,
      x: { label: "ε left", domain: [0, h.max_epsilon] }, y: { label: "subjects", grid: true },
      marks: [
        Plot.rectY(bins, { x1: "x1", x2: "x2", y: "n", fill: "#6f8fe0", insetLeft: 0.5, insetRight: 0.5, className: "dp-bin",
          title: (d) => `${fmt(d.n)} subjects with ε left in [${fmtEpsilon(d.x1)}, ${fmtEpsilon(d.x2)})` }),
        Plot.ruleY([0]),
      ],
    });
  }

  function quality(report) {
    const data = [1, 2, 3].map((k) => ({ way: `${k}-way`, tvd: report[`tvd_${k}way`] })).filter((d) => d.tvd !== null && d.tvd !== undefined);
    if (!data.length) return null;
    return plot({
      height: 180, width: 360, marginLeft: 50,
      title: "Average total variation distance of the marginals",
      caption: "0: the release's marginals equal the source's; 1: disjoint",
      x: { label: null }, y: { label: "TVD", grid: true, domain: [0, Math.max(0.1, ...data.map((d) => d.tvd)) * 1.15] },
      marks: [
        Plot.barY(data, { x: "way", y: "tvd", fill: "#6f8fe0", className: "dp-tvd" }),
        Plot.text(data, { x: "way", y: "tvd", text: (d) => d.tvd.toFixed(3), dy: -8 }),
        Plot.ruleY([0]),
      ],
    });
  }

  // A synopsis's leaves as boxes on its first two columns, shaded by density (count per unit of area).
  function leaves(syn) {
    const d = syn.columns.length;
    const data = syn.leaves.map((l) => {
      const area = d >= 2 ? (l.hi[0] - l.lo[0]) * (l.hi[1] - l.lo[1]) : l.hi[0] - l.lo[0];
      return { ...l, density: Math.max(0, l.count) / (area || 1) };
    });
    const title = (l) => `${fmt(l.count)} [${fmt(l.ci[0])}, ${fmt(l.ci[1])}] in ` +
      syn.columns.map((c, j) => `${c} ∈ [${fmt(l.lo[j])}, ${fmt(l.hi[j])})`).join(", ");
    if (d === 1) {
      return plot({
        height: 220, x: { label: syn.columns[0], domain: [syn.lower[0], syn.upper[0]] }, y: { label: "count per unit", grid: true },
        marks: [Plot.rectY(data, { x1: (l) => l.lo[0], x2: (l) => l.hi[0], y: "density", fill: "#6f8fe0", className: "dp-leaf", title }), Plot.ruleY([0])],
      });
    }
    return plot({
      width: 760, height: 420, marginLeft: 50,
      title: `${syn.leaves.length.toLocaleString("en-US")} leaves${d > 2 ? ` (boxes on ${syn.columns[0]}, ${syn.columns[1]})` : ""}`,
      x: { label: syn.columns[0], domain: [syn.lower[0], syn.upper[0]] },
      y: { label: syn.columns[1], domain: [syn.lower[1], syn.upper[1]] },
      // quantiles: a few dense small leaves would otherwise wash every other one out
      color: { type: "quantile", n: 7, scheme: "blues", legend: true, label: "points per unit of area (quantiles)",
        tickFormat: (v) => fmt(+v.toPrecision(2)) },
      marks: [
        Plot.rect(data, { x1: (l) => l.lo[0], x2: (l) => l.hi[0], y1: (l) => l.lo[1], y2: (l) => l.hi[1],
          fill: "density", stroke: "#ffffff", strokeWidth: 0.3, className: "dp-leaf", title }),
        Plot.frame(),
      ],
    });
  }

  return { answer, spending, histogram, quality, leaves, shape };
})();
