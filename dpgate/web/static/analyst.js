// dpgate web: the analyst's page: the editor, each answer as a chart and a table, the budget and history.
"use strict";

const dpAnalyst = (() => {
  let started = false;

  function selectedOrAll() {
    const box = document.getElementById("sql");
    const picked = box.value.slice(box.selectionStart, box.selectionEnd);
    return (picked.trim() ? picked : box.value).trim();
  }

  // The answer's rows, each noisy value with its interval under it.
  function answerTable(env) {
    const ivs = env.intervals || [];
    const numeric = env.types.map((t) => /(INT|DOUBLE|FLOAT|DECIMAL|REAL|NUMERIC)/i.test(t));
    const rows = env.rows.map((r, i) => r.map((v, j) => {
      const iv = (ivs[i] || {})[env.columns[j]];
      if (!iv) return fmt(v);
      return el("span", null, fmt(v), el("br"), el("span", { class: "ci" }, `[${fmt(iv[0])}, ${fmt(iv[1])}]`));
    }));
    return el("div", { class: "scroll" }, table(env.columns, rows, numeric));
  }

  function answerCard(sql, env) {
    const lines = [];
    if (env.message) lines.push(el("li", null, env.message));
    if (env.cost) {
      const c = env.cost;
      lines.push(el("li", { class: "cost" }, `cost: ε ${fmtEpsilon(c.epsilon)}` + (c.delta ? `, δ ${c.delta}` : "") +
        ` · your quota left: ε ${fmtEpsilon(c.epsilon_remaining)} · ${c.mechanism}` +
        ` · ${parseFloat((100 * c.confidence).toPrecision(12))}% intervals` + (c.remembered ? ` · answered again from ${c.remembered} (free)` : "")));
      if (!c.private) lines.push(el("li", { class: "notprivate" }, "NOT PRIVATE: a fixed test seed was used"));
    }
    if (env.population) lines.push(el("li", { class: "population" }, "population: " + env.population.text));
    for (const note of env.notes || []) lines.push(el("li", { class: "note" }, "note: " + note));
    const figures = dpCharts.answer(env);
    return el("div", { class: "card answer" },
      el("pre", { class: "sql" }, sql),
      figures.length ? el("div", { class: "figures" }, figures) : null,
      env.columns.length ? answerTable(env) : null,
      el("ul", { class: "lines" }, lines),
      env.cost ? null : el("p", { class: "muted small" }, "Free: nothing was charged."));
  }

  async function run(sql) {
    if (!sql) return;
    const buttons = [document.getElementById("run"), document.getElementById("explain")];
    buttons.forEach((b) => { b.disabled = true; });
    const answers = document.getElementById("answers");
    try {
      const env = await api("POST", "/api/query", { sql });
      answers.prepend(answerCard(sql, env));
      if (env.cost) { loadBudget(); loadHistory(); }
    } catch (e) {
      if (e.status === 401) return;
      answers.prepend(el("div", { class: "card answer" }, el("pre", { class: "sql" }, sql),
        refusal(e.info || { code: "", message: String(e), hint: "" }),
        el("p", { class: "muted small" }, "Refused: nothing was charged unless the message says so.")));
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  async function loadBudget() {
    const box = document.getElementById("budget");
    try {
      const b = await api("GET", "/api/budget");
      const used = b.epsilon_quota > 0 ? Math.min(1, b.epsilon_spent / b.epsilon_quota) : 1;
      const bar = el("div");
      bar.style.width = `${(100 * (1 - used)).toFixed(1)}%`; // CSSOM: allowed by the page's CSP
      clear(box).append(
        el("div", { class: "remaining" }, el("strong", null, `ε ${fmtEpsilon(b.epsilon_remaining)}`), ` left of ${fmtEpsilon(b.epsilon_quota)}`),
        el("div", { class: "meter", title: `spent ε ${fmtEpsilon(b.epsilon_spent)}` }, bar),
        el("div", { class: "muted small" }, `δ ${b.delta_remaining} left of ${b.delta_quota}; per query at most ε ${fmtEpsilon(b.epsilon_per_query)}, δ ${b.delta_per_query}`),
        el("details", null, el("summary", null, "SHOW BUDGET (subjects' budgets, as counts)"),
          table(b.show_budget.columns, b.show_budget.rows)));
    } catch (e) {
      if (e.info) clear(box).append(refusal(e.info));
    }
  }

  async function loadHistory() {
    const box = document.getElementById("history");
    try {
      const h = await api("GET", "/api/history");
      const at = h.columns.indexOf("at"), eps = h.columns.indexOf("epsilon"), cls = h.columns.indexOf("class");
      const st = h.columns.indexOf("statement"), rel = h.columns.indexOf("released");
      const rows = h.rows.map((r) => [String(r[at]).replace("T", " ").slice(0, 19), fmtEpsilon(r[eps]), r[cls],
        r[rel] ? "answered" : "charged, not answered", el("code", null, r[st])]);
      clear(box).append(rows.length ? el("div", { class: "scroll" }, table(["at", "ε", "class", "outcome", "statement"], rows, [false, true]))
        : el("p", { class: "muted" }, "Nothing spent yet."));
    } catch (e) {
      if (e.info) clear(box).append(refusal(e.info));
    }
  }

  async function loadTables() {
    const list = document.getElementById("tables");
    try {
      const t = await api("GET", "/api/tables");
      clear(list).append(...t.tables.map((tb) => el("li", null,
        el("span", { class: "name", title: "put it in the editor", onclick: () => insert(tb.name) }, tb.name),
        el("span", { class: "kind" }, tb.kind),
        tb.columns.length > 12
          ? el("details", { class: "cols" }, el("summary", null, `${tb.columns.slice(0, 8).join(", ")} … (${tb.columns.length} columns)`),
            tb.columns.join(", "))
          : el("div", { class: "cols" }, tb.columns.join(", ")))));
    } catch (e) {
      if (e.info) clear(list).append(refusal(e.info));
    }
  }

  function insert(text) {
    const box = document.getElementById("sql");
    const at = box.selectionStart;
    box.value = box.value.slice(0, at) + text + box.value.slice(box.selectionEnd);
    box.focus();
    box.selectionStart = box.selectionEnd = at + text.length;
  }

  function start() {
    clear(document.getElementById("answers"));
    if (!started) {
      started = true;
      const box = document.getElementById("sql");
      box.placeholder = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) col, COUNT(*) AS n FROM table GROUP BY col";
      document.getElementById("run").addEventListener("click", () => run(selectedOrAll()));
      document.getElementById("explain").addEventListener("click", () => {
        const sql = selectedOrAll();
        if (sql) run(/^\s*explain\b/i.test(sql) ? sql : "EXPLAIN PRIVACY " + sql);
      });
      box.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(selectedOrAll()); }
      });
    }
    loadBudget();
    loadTables();
    loadHistory();
  }

  return { start, run };
})();
