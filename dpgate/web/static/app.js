// dpgate web: signing in, the API, and the small DOM functions the analyst and owner pages share.
"use strict";

const dp = { csrf: null, name: null, role: null };

// An element with attributes and children (strings become text: nothing is ever parsed as HTML).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function fmt(v) {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "number") {
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    const a = Math.abs(v);
    return a >= 1000 ? v.toLocaleString("en-US", { maximumFractionDigits: 1 }) : String(+v.toPrecision(4));
  }
  if (typeof v === "boolean") return v ? "true" : "false";
  return String(v);
}

function fmtEpsilon(v) { return v === null || v === undefined ? "" : String(+(+v).toPrecision(6)); }

// A call to the JSON API; a refusal is thrown as an Error whose .info has {code, message, hint}.
async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET" && dp.csrf) opts.headers["X-CSRF-Token"] = dp.csrf;
  const response = await fetch(path, opts);
  let data;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    const info = data && data.code ? data : { code: "HTTP " + response.status, message: response.statusText, hint: "" };
    const error = new Error(info.message);
    error.info = info;
    error.status = response.status;
    if (response.status === 401 && path !== "/api/login") showSignIn("Your session has ended: sign in again.");
    throw error;
  }
  return data;
}

// A refusal as the page shows it: its code, what was refused, and what would be accepted.
function refusal(info) {
  return el("div", { class: "refusal", role: "alert" },
    el("div", null, el("span", { class: "code" }, info.code), info.message),
    info.hint ? el("div", { class: "hint" }, "hint: " + info.hint) : null);
}

function table(columns, rows, numeric) {
  const head = el("tr", null, columns.map((c) => el("th", null, c)));
  const body = rows.map((r) => el("tr", null, r.map((v, j) =>
    el("td", { class: numeric && numeric[j] ? "num" : null }, v instanceof Node ? v : fmt(v)))));
  return el("table", { class: "data" }, el("thead", null, head), el("tbody", null, body));
}

function show(section) {
  for (const id of ["signin", "analyst", "owner"]) document.getElementById(id).hidden = id !== section;
  document.getElementById("signout").hidden = section === "signin";
}

function showSignIn(message) {
  dp.csrf = dp.name = dp.role = null;
  document.getElementById("who").textContent = "";
  show("signin");
  const box = document.getElementById("signin-error");
  box.hidden = !message;
  clear(box);
  if (message) box.append(message);
  document.getElementById("signin-name").focus();
}

function signedIn(who) {
  dp.csrf = who.csrf; dp.name = who.name; dp.role = who.role;
  document.getElementById("who").textContent = `${who.name} (${who.role})`;
  if (who.role === "owner") { show("owner"); dpOwner.start(); } else { show("analyst"); dpAnalyst.start(); }
}

async function signIn(event) {
  event.preventDefault();
  const button = document.getElementById("signin-button");
  const box = document.getElementById("signin-error");
  button.disabled = true;
  try {
    const who = await api("POST", "/api/login", {
      name: document.getElementById("signin-name").value,
      password: document.getElementById("signin-password").value,
    });
    document.getElementById("signin-password").value = "";
    box.hidden = true;
    signedIn(who);
  } catch (e) {
    clear(box).append(refusal(e.info || { code: "", message: String(e), hint: "" }));
    box.hidden = false;
  } finally {
    button.disabled = false;
  }
}

async function signOut() {
  try { await api("POST", "/api/logout", {}); } catch (e) { /* the session may have ended already */ }
  showSignIn("Signed out.");
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("where").textContent = location.host;
  document.getElementById("signin-form").addEventListener("submit", signIn);
  document.getElementById("signout").addEventListener("click", signOut);
  try { signedIn(await api("GET", "/api/session")); } catch (e) { showSignIn(""); }
});
