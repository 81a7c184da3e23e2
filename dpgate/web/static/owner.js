// dpgate web: the owner's page: where the budget went, what subjects have left, and the releases.
"use strict";

const dpOwner = (() => {
  async function start() {
    let o;
    try {
      o = await api("GET", "/api/owner/overview");
    } catch (e) {
      if (e.info) clear(document.getElementById("spending")).append(refusal(e.info));
      return;
    }
    const spending = clear(document.getElementById("spending"));
    const chart = dpCharts.spending(o.timeline, o.analysts, spending.clientWidth);
    spending.append(chart || el("p", { class: "muted" }, "No analyst has spent anything yet."));
    const numeric = o.analysts.columns.map((c, j) => o.analysts.rows.some((r) => typeof r[j] === "number"));
    clear(document.getElementById("analysts")).append(table(o.analysts.columns, o.analysts.rows, numeric));
    const notes = clear(document.getElementById("overcommitted"));
    for (const line of o.overcommitted) notes.append(el("p", { class: "muted small" }, line));

    const hist = clear(document.getElementById("histograms"));
    for (const h of o.histograms) {
      hist.append(el("div", null, h.bins.length ? dpCharts.histogram(h) : el("p", { class: "muted" }, `${h.table}: no subjects`),
        el("p", { class: "muted small" }, `${h.none_left.toLocaleString("en-US")} with no ε left` +
          (h.roster !== "roster_" + h.table ? ` · budgets shared by the tables of ${h.roster.replace(/^roster_/, "")}` : ""))));
    }
    if (!o.histograms.length) hist.append(el("p", { class: "muted" }, "No protected table with subjects."));

    const list = clear(document.getElementById("releases"));
    for (const r of o.releases) list.append(release(r));
    if (!o.releases.length) list.append(el("p", { class: "muted" }, "Nothing has been released yet (CREATE SYNTHETIC TABLE ...)."));
  }

  function release(r) {
    const charts = el("div", { class: "figures" });
    const actions = el("div", { class: "actions" });
    if (r.quality) {
      actions.append(el("button", { type: "button", class: "secondary", "data-release": r.name, "data-report": "quality",
        onclick: (e) => report(e.target, charts, `/api/owner/quality/${encodeURIComponent(r.name)}`, qualityView) }, "Quality"));
    }
    if (r.leaves) {
      actions.append(el("button", { type: "button", class: "secondary", "data-release": r.name, "data-report": "leaves",
        onclick: (e) => report(e.target, charts, `/api/owner/leaves/${encodeURIComponent(r.name)}`, dpCharts.leaves) }, "Leaves map"));
    }
    const when = String(r.created_at).replace("T", " ").slice(0, 19);
    return el("div", { class: "release", "data-name": r.name },
      el("div", null, el("strong", null, r.name), el("span", { class: "badge" }, r.kind),
        r.dropped_at ? el("span", { class: "badge dropped" }, "dropped") : null,
        r.private ? null : el("span", { class: "notprivate" }, " NOT PRIVATE (test seed)")),
      el("div", { class: "meta" }, `from ${r.sources.join(", ")} · ${r.mechanism} · ε ${fmtEpsilon(r.epsilon)}` +
        (r.delta ? `, δ ${r.delta}` : "") + ` · ${fmt(r.rows)} rows · by ${r.analyst} · ${when}`),
      r.columns.length ? el("div", { class: "meta" }, "columns: " + r.columns.join(", ")) : null,
      actions, charts);
  }

  function qualityView(q) {
    const chart = dpCharts.quality(q);
    const said = { columns: "columns compared", rows_source: "rows in the source", rows_release: "rows in the release" };
    const facts = Object.entries(q).filter(([k]) => !/^tvd_/.test(k) && !["release", "source"].includes(k));
    return el("div", null, chart, table(["", ""], facts.map(([k, v]) => [said[k] || k.replace(/_/g, " "), v]), [false, true]));
  }

  async function report(button, into, path, view) {
    button.disabled = true;
    try {
      clear(into).append(view(await api("GET", path)));
    } catch (e) {
      if (e.info) clear(into).append(refusal(e.info));
    } finally {
      button.disabled = false;
    }
  }

  return { start };
})();
