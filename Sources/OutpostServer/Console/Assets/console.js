// The Outpost administrator's console: one page, its views drawn from the
// server's JSON API (/admin/api/) with the session cookie. Every piece of
// data becomes a text node (never markup), so a record holding "<script>"
// shows as those characters; the server's Content-Security-Policy refuses
// any script that is not this file.

import { strings, languages } from "./console-strings.js";

const lang = (navigator.languages || [navigator.language || "en"])
  .map((tag) => String(tag).toLowerCase().split("-")[0])
  .find((code) => languages.includes(code)) || "en";
document.documentElement.lang = lang;
const plural = new Intl.PluralRules(lang);
const numbers = new Intl.NumberFormat(lang);
const times = new Intl.DateTimeFormat(lang, { dateStyle: "medium", timeStyle: "medium" });

/** A sentence in the chosen language, with {placeholders} filled; a count picks the plural form. */
function t(key, params = {}) {
  let text = strings[lang][key] ?? strings.en[key] ?? key;
  if (typeof text === "object") text = text[plural.select(params.count ?? 0)] ?? text.other;
  return text.replace(/\{(\w+)\}/g, (_, name) => {
    const value = params[name];
    return typeof value === "number" ? numbers.format(value) : String(value ?? "");
  });
}

function time(text) {
  if (!text) return t("none");
  const date = new Date(text);
  return isNaN(date) ? String(text) : times.format(date);
}

function size(bytes) {
  if (bytes < 1000) return `${numbers.format(bytes)} B`;
  if (bytes < 1e6) return `${numbers.format(Math.round(bytes / 100) / 10)} kB`;
  return `${numbers.format(Math.round(bytes / 1e5) / 10)} MB`;
}

/** An element with properties (attributes, `on*` listeners) and children (text or nodes). */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = String(value);
    else if (name === "value") node.value = value;
    else if (name === "checked") node.checked = Boolean(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const main = document.getElementById("main");
const top = document.getElementById("top");

/** Replaces the page's content; absent parts (null, false) are left out. */
function show(...nodes) {
  main.replaceChildren(...nodes.flat().filter((node) => node !== null && node !== undefined && node !== false));
}
let session = null;

class SignedOut extends Error {}

/** Calls the console API; a change sends the session's CSRF token. */
async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && session) headers["X-CSRF-Token"] = session.csrf;
  let response;
  try {
    response = await fetch(`/admin/api/${path}`, {
      method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new Error(t("error.network"));
  }
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401 && path !== "session") throw new SignedOut();
  if (!response.ok) {
    const error = answer.error || {};
    const fields = error.fields ? " (" + Object.entries(error.fields).map(([k, v]) => `${k}: ${v}`).join("; ") + ")" : "";
    throw new Error(t("error.generic", { message: (error.message || response.status) + fields }));
  }
  return answer;
}

function message(text, kind = "error") {
  const box = document.getElementById("message");
  if (!box) return;
  box.textContent = text;
  box.className = `message ${kind}`;
  box.hidden = !text;
}

function messageBox() {
  return h("p", { id: "message", class: "message", role: "alert", hidden: true });
}

/** A form field: its label above its control. */
function labelled(id, text, control) {
  return h("div", { class: "field" }, h("label", { for: id, text }), control);
}

function table(id, caption, columns, rows) {
  return h("div", { class: "table-wrap" },
    h("table", { id },
      h("caption", { text: caption }),
      h("thead", {}, h("tr", {}, columns.map((name) => h("th", { scope: "col", text: name })))),
      h("tbody", {}, rows)));
}

/** A record's data as a definition list, every value as text. */
function dataList(data, id) {
  if (!data || typeof data !== "object") return h("p", { text: t("none") });
  return h("dl", { class: "data", id },
    Object.keys(data).sort().map((key) => [
      h("dt", { text: key }),
      h("dd", { text: typeof data[key] === "string" ? data[key] : JSON.stringify(data[key]) }),
    ]));
}

function recordName(record) {
  const data = record.data || {};
  const first = data.name ?? data.title ?? Object.values(data).find((value) => typeof value === "string");
  return first ? String(first) : record.uuid;
}

// MARK: Routing

function parseHash() {
  const [path, query] = (location.hash.replace(/^#\/?/, "") || "records").split("?");
  return { parts: path.split("/").map(decodeURIComponent), params: new URLSearchParams(query || "") };
}

function go(path, params) {
  const query = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null)).toString() : "";
  const target = `#/${path}${query ? "?" + query : ""}`;
  if (location.hash === target) render(); else location.hash = target;
}

let activityTimer = null;

async function render() {
  clearTimeout(activityTimer);
  if (!session) return signInPage();
  const { parts, params } = parseHash();
  drawHeader(parts[0]);
  show(h("p", { text: t("loading") }));
  try {
    switch (parts[0]) {
      case "record": await recordPage(parts[1], parts[2]); break;
      case "devices": await devicesPage(params); break;
      case "problems": await problemsPage(params); break;
      case "tokens": await tokensPage(); break;
      case "activity": await activityPage(); break;
      default: await recordsPage(params);
    }
  } catch (error) {
    if (error instanceof SignedOut) return signedOut();
    show(messageBox());
    message(error.message);
  }
}

function signedOut() {
  session = null;
  signInPage(t("signin.ended"));
}

function drawHeader(current) {
  const pages = ["records", "devices", "problems", "tokens", "activity"];
  const active = current === "record" ? "records" : current;
  top.replaceChildren(
    h("h1", { text: t("title") }),
    h("nav", { "aria-label": t("title") },
      h("ul", {}, pages.map((page) => h("li", {},
        h("a", { href: `#/${page}`, id: `nav-${page}`, "aria-current": page === active ? "page" : false, text: t(`nav.${page}`) }))))),
    h("p", { class: "who" },
      h("span", { id: "signed-in-as", text: t("signed.in.as", { user: session.user }) }), " ",
      h("button", { id: "sign-out", type: "button", onclick: signOut, text: t("signout") })));
}

// MARK: Sign-in

function signInPage(notice) {
  top.replaceChildren(h("h1", { text: t("title") }));
  document.title = t("title");
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const form = h("form", { id: "signin", class: "card", onsubmit: async (event) => {
    event.preventDefault();
    try {
      session = await api("session", { method: "POST", body: { token: input.value } });
      input.value = "";
      if (!location.hash || location.hash === "#") location.hash = "#/records"; else render();
    } catch (error) {
      message(error.message);
    }
  } },
    h("h2", { text: t("signin.heading") }),
    h("p", { text: t("signin.explain") }),
    labelled("token", t("signin.token"), input),
    h("button", { id: "sign-in", type: "submit", text: t("signin.submit") }),
    messageBox());
  show(form);
  if (notice) message(notice, "info");
  input.focus();
}

async function signOut() {
  try { await api("session", { method: "DELETE" }); } catch { /* the cookie is dropped either way */ }
  session = null;
  location.hash = "";
  signInPage();
}

// MARK: Records

async function recordsPage(params) {
  const collections = session.collections;
  const chosen = params.get("collection") || (collections.find((c) => c.name === "people") || collections[0]).name;
  const field = (id, label, props = {}) => labelled(id, label, h("input", { id, name: id, ...props }));
  const select = (id, label, options, value) => labelled(id, label,
    h("select", { id, name: id }, options.map(([key, text]) => h("option", { value: key, selected: key === value, text }))));
  const form = h("form", { id: "search-form", class: "filters", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form).entries());
    go("records", { collection: values.collection, q: values.q, owner: values.owner, team: values.team,
      from: values.from, to: values.to, deleted: values.deleted === "live" ? "" : values.deleted });
  } },
    select("collection", t("records.collection"), collections.map((c) => [c.name, c.name]), chosen),
    labelled("search-text", t("records.text"),
      h("input", { id: "search-text", name: "q", type: "search", value: params.get("q") || "", autocomplete: "off" })),
    field("owner", t("records.owner"), { value: params.get("owner") || "" }),
    field("team", t("records.team"), { value: params.get("team") || "" }),
    field("from", t("records.from"), { type: "date", value: params.get("from") || "" }),
    field("to", t("records.to"), { type: "date", value: params.get("to") || "" }),
    select("deleted", t("records.deleted"), ["live", "deleted", "all"].map((k) => [k, t(`records.deleted.${k}`)]),
      params.get("deleted") || "live"),
    h("button", { id: "search", type: "submit", text: t("records.submit") }));
  const info = collections.find((c) => c.name === chosen);
  const heading = [h("h2", { text: t("records.heading") }),
    h("p", { id: "collection-count", text: t("records.count", { count: info ? info.count : 0, collection: chosen }) })];
  show(...heading, form, messageBox(), h("p", { text: t("loading") }));
  const query = new URLSearchParams({ collection: chosen });
  for (const name of ["q", "owner", "team", "from", "to", "deleted"]) if (params.get(name)) query.set(name, params.get(name));
  const found = await api(`records?${query}`);
  const rows = found.records.map((record) => h("tr", {},
    h("td", {}, h("a", { class: "record-link", href: `#/record/${encodeURIComponent(record.collection)}/${record.uuid}`, text: recordName(record) })),
    h("td", { text: record.owner }), h("td", { text: record.team }), h("td", { text: time(record.updated_at) }),
    h("td", { text: t(record.deleted ? "state.deleted" : "state.live") }), h("td", { text: numbers.format(record.version) })));
  show(...heading, form, messageBox(),
    h("p", { id: "result-count", role: "status", text: found.records.length
      ? t("records.found", { count: found.records.length, ms: found.milliseconds }) : t("records.none") }),
    found.more ? h("p", { text: t("records.more") }) : null,
    found.records.length ? table("results", t("records.heading"),
      [t("col.record"), t("col.owner"), t("col.team"), t("col.updated"), t("col.state"), t("col.version")], rows) : null);
  document.title = `${t("records.heading")} · ${t("title")}`;
}

function problemRows(problems) {
  return problems.map((p) => h("tr", { class: `problem ${p.kind}` },
    h("td", { text: time(p.at) }), h("td", { text: t(`kind.${p.kind}`) }),
    h("td", {}, h("a", { href: `#/record/${encodeURIComponent(p.collection)}/${p.uuid}`, text: `${p.collection}/${p.uuid.slice(0, 8)}…` })),
    h("td", { text: `${p.user} · ${p.client.slice(0, 8)}…` }),
    h("td", { text: p.code || t("none") }),
    h("td", {}, p.errors ? h("ul", {}, Object.entries(p.errors).map(([k, v]) => h("li", { text: `${k}: ${v}` }))) : t("none")),
    h("td", {}, h("pre", { class: "json", text: p.sent ? JSON.stringify(p.sent, null, 1) : t("none") })),
    h("td", {}, h("pre", { class: "json", text: p.server_data ? JSON.stringify(p.server_data, null, 1) : t("none") })),
    h("td", { text: t(`lost.${p.lost}`) }),
    h("td", { text: t(p.open ? "problem.open" : "problem.resolved") })));
}

const problemColumns = () => [t("col.when"), t("problems.kind"), t("col.record"), t("col.client"), t("col.code"),
  t("col.errors"), t("col.sent"), t("col.server"), t("col.lost"), t("col.status")];

async function recordPage(collection, uuid) {
  const record = await api(`records/${encodeURIComponent(collection)}/${encodeURIComponent(uuid)}`);
  const history = record.history.map((version) => h("tr", {},
    h("td", { text: numbers.format(version.version) }), h("td", { text: t(`op.${version.op}`) }),
    h("td", { text: time(version.server_time) }), h("td", { text: time(version.device_time) }),
    h("td", { text: version.user }), h("td", { class: "client", text: version.client }),
    h("td", {}, h("pre", { class: "json", text: version.data ? JSON.stringify(version.data, null, 1) : t("none") }))));
  const owner = h("input", { id: "assign-owner", name: "owner", required: true, value: record.owner });
  const team = h("input", { id: "assign-team", name: "team", required: true, value: record.team });
  const assign = h("form", { id: "assign", class: "filters", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const done = await api(`records/${encodeURIComponent(collection)}/${uuid}/assign`,
        { method: "POST", body: { owner: owner.value, team: team.value } });
      await recordPage(collection, uuid);
      message(t("record.assign.done", done), "info");
    } catch (error) {
      if (error instanceof SignedOut) return signedOut();
      message(error.message);
    }
  } },
    labelled("assign-owner", t("record.assign.owner"), owner),
    labelled("assign-team", t("record.assign.team"), team),
    h("button", { id: "assign-submit", type: "submit", text: t("record.assign.submit") }));
  const readers = record.readers.users.length
    ? h("ul", { id: "readers" }, record.readers.users.map((reader) => h("li", { text: `${reader.user} (${t(`role.${reader.role}`)})` })))
    : h("p", { id: "readers", text: t("record.readers.none") });
  const attachments = record.attachments.map((file) => h("figure", { class: "attachment" },
    file.held && file.content_type.startsWith("image/")
      ? h("img", { src: `/admin/api/blobs/${file.sha256}`, alt: `${file.field}: ${file.content_type}`, loading: "lazy" }) : null,
    h("figcaption", { text: `${file.field}: ${t(file.held ? "attachment.held" : "attachment.missing", { type: file.content_type, size: size(file.size) })}` })));
  show(
    h("p", {}, h("a", { href: `#/records?collection=${encodeURIComponent(collection)}`, text: t("record.back") })),
    h("h2", { id: "record-title", text: `${recordName(record)}` }),
    h("p", { class: "meta", text: `${t("record.heading", { uuid: record.uuid })} · ${t("col.owner")}: ${record.owner} · ${t("col.team")}: ${record.team} · ${t("col.version")}: ${numbers.format(record.version)} · ${t(record.deleted ? "state.deleted" : "state.live")}` }),
    messageBox(),
    record.tombstone ? h("p", { id: "tombstone", class: "notice", text: t("record.tombstone", { time: time(record.tombstone.deleted_at), version: record.tombstone.version }) }) : null,
    h("section", {}, h("h3", { text: t("record.data") }), dataList(record.data, "record-data")),
    attachments.length ? h("section", {}, h("h3", { text: t("record.attachments") }), h("div", { class: "attachments" }, attachments)) : null,
    h("section", {}, h("h3", { text: t("record.history") }),
      history.length ? table("history", t("record.history"), [t("col.version"), t("col.op"), t("col.servertime"), t("col.devicetime"),
        t("col.user"), t("col.client"), t("record.data")], history) : h("p", { text: t("record.history.none") })),
    h("section", {}, h("h3", { text: t("record.readers") }),
      h("p", { text: t("record.readers.rule", { owner: record.readers.owner, team: record.readers.team }) }), readers),
    record.problems.length ? h("section", {}, h("h3", { text: t("record.problems") }),
      table("record-problems", t("record.problems"), problemColumns(), problemRows(record.problems))) : null,
    h("section", {}, h("h3", { text: t("record.assign") }), assign));
  document.title = `${recordName(record)} · ${t("title")}`;
}

// MARK: Devices

function blockingText(device) {
  if (!device.blocking.length) return t("blocking.none");
  return device.blocking.map((item) => t(`blocking.${item.code}`, item)).join("; ");
}

async function devicesPage(params) {
  const sort = params.get("sort") || "silent";
  const user = params.get("user") || "";
  const query = new URLSearchParams({ sort });
  if (user) query.set("user", user);
  const found = await api(`devices?${query}`);
  const sortSelect = h("select", { id: "device-sort", name: "sort" },
    ["silent", "recent"].map((key) => h("option", { value: key, selected: key === sort, text: t(`devices.sort.${key}`) })));
  const userInput = h("input", { id: "device-user", name: "user", value: user });
  const form = h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); go("devices", { sort: sortSelect.value, user: userInput.value }); } },
    labelled("device-sort", t("devices.sort"), sortSelect),
    labelled("device-user", t("devices.user"), userInput),
    h("button", { type: "submit", text: t("records.submit") }));
  sortSelect.addEventListener("change", () => go("devices", { sort: sortSelect.value, user: userInput.value }));
  const rows = found.devices.map((device) => h("tr", { class: "device", "data-user": device.user, "data-client": device.client },
    h("td", { text: device.user }), h("td", { class: "client", text: device.client }),
    h("td", { text: time(device.last_seen) }), h("td", { text: device.last_seq == null ? t("none") : numbers.format(device.last_seq) }),
    h("td", { text: device.app || t("none") }), h("td", { text: device.schema == null ? t("none") : numbers.format(device.schema) }),
    h("td", {}, h("a", { href: `#/problems?user=${encodeURIComponent(device.user)}&client=${device.client}`,
      text: t("problems.count", { count: device.open_rejections, conflicts: device.open_conflicts }) })),
    h("td", { class: `live ${device.live}`, text: t(`live.${device.live}`) }),
    h("td", { class: "blocking", text: blockingText(device) })));
  show(h("h2", { text: t("devices.heading") }), form, messageBox(),
    rows.length ? table("devices", t("devices.heading"), [t("col.user"), t("col.client"), t("col.lastseen"), t("col.lastseq"),
      t("col.app"), t("col.schema"), t("col.problems"), t("col.live"), t("col.blocking")], rows) : h("p", { text: t("devices.none") }));
  document.title = `${t("devices.heading")} · ${t("title")}`;
}

// MARK: Problems

async function problemsPage(params) {
  const query = new URLSearchParams();
  for (const name of ["kind", "user", "client", "collection", "code", "open"]) if (params.get(name)) query.set(name, params.get(name));
  const found = await api(`problems?${query}`);
  const kind = h("select", { id: "problem-kind", name: "kind" },
    ["", "rejected", "conflict"].map((key) => h("option", { value: key, selected: key === (params.get("kind") || ""), text: t(key ? `problems.kind.${key}` : "problems.kind.all") })));
  const user = h("input", { id: "problem-user", name: "user", value: params.get("user") || "" });
  const open = h("input", { id: "problem-open", name: "open", type: "checkbox", checked: params.get("open") === "1" });
  const form = h("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    go("problems", { kind: kind.value, user: user.value, client: params.get("client") || "", open: open.checked ? "1" : "" });
  } },
    labelled("problem-kind", t("problems.kind"), kind),
    labelled("problem-user", t("devices.user"), user),
    h("label", { class: "check" }, open, t("problems.openonly")),
    h("button", { type: "submit", text: t("records.submit") }));
  show(h("h2", { text: t("problems.heading") }), form, messageBox(),
    found.problems.length ? table("problems", t("problems.heading"), problemColumns(), problemRows(found.problems))
      : h("p", { id: "problems-none", text: t("problems.none") }));
  document.title = `${t("problems.heading")} · ${t("title")}`;
}

// MARK: Tokens

async function tokensPage(issued) {
  const found = await api("tokens");
  const user = h("input", { id: "issue-user", name: "user", required: true, autocomplete: "off" });
  const role = h("select", { id: "issue-role", name: "role" },
    ["field", "coordinator", "admin"].map((key) => h("option", { value: key, text: t(`role.${key}`) })));
  const team = h("input", { id: "issue-team", name: "team", required: true, autocomplete: "off" });
  const days = h("input", { id: "issue-ttl", name: "ttl", type: "number", min: "1", max: "3650" });
  const form = h("form", { id: "issue", class: "filters", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const body = { user: user.value, role: role.value, team: team.value };
      if (days.value) body.ttl_seconds = Number(days.value) * 86400;
      const answer = await api("tokens", { method: "POST", body });
      await tokensPage({ user: body.user, token: answer.token });
    } catch (error) {
      if (error instanceof SignedOut) return signedOut();
      message(error.message);
    }
  } },
    labelled("issue-user", t("tokens.user"), user),
    labelled("issue-role", t("tokens.role"), role),
    labelled("issue-team", t("tokens.team"), team),
    labelled("issue-ttl", t("tokens.ttl"), days),
    h("button", { id: "issue-submit", type: "submit", text: t("tokens.submit") }));
  const rows = found.tokens.map((token) => {
    const cell = h("td", {});
    const revoke = h("button", { type: "button", class: "revoke", "data-id": token.id, "data-user": token.user, text: t("tokens.revoke"),
      onclick: () => {
        // Asked in the page, not in a browser dialog: readable, and reachable by keyboard.
        const confirm = h("button", { type: "button", class: "confirm-revoke danger", text: t("tokens.revoke.confirm", { user: token.user }),
          onclick: async () => {
            try {
              await api(`tokens/${token.id}/revoke`, { method: "POST", body: {} });
              await tokensPage();
              message(t("tokens.revoked"), "info");
            } catch (error) {
              if (error instanceof SignedOut) return signedOut();
              message(error.message);
            }
          } });
        cell.replaceChildren(confirm);
        confirm.focus();
      } });
    if (token.state === "active") cell.append(revoke);
    return h("tr", { class: `token ${token.state}`, "data-user": token.user },
      h("td", { text: token.user }), h("td", { text: t(`role.${token.role}`) }), h("td", { text: token.team }),
      h("td", { text: time(token.created_at) }), h("td", { text: token.expires_at ? time(token.expires_at) : t("never") }),
      h("td", { class: "state", text: t(`token.${token.state}`) }), cell);
  });
  show(h("h2", { text: t("tokens.heading") }), messageBox(),
    h("section", { class: "card" }, h("h3", { text: t("tokens.issue") }), form,
      issued ? h("div", { id: "issued", role: "status" }, h("p", { text: t("tokens.issued", { user: issued.user }) }),
        h("code", { id: "issued-token", text: issued.token })) : null),
    rows.length ? table("tokens", t("tokens.heading"), [t("col.user"), t("col.role"), t("col.team"), t("col.created"),
      t("col.expires"), t("col.state"), t("col.actions")], rows) : h("p", { text: t("tokens.none") }));
  document.title = `${t("tokens.heading")} · ${t("title")}`;
}

// MARK: Activity

async function activityPage() {
  const report = await api("activity");
  const minutes = report.minutes.slice().reverse().slice(0, 15);
  const peak = Math.max(1, ...minutes.map((m) => m.pushes + m.pulls));
  const bar = (m) => h("span", { class: "bar", "aria-hidden": "true", "data-width": Math.round(((m.pushes + m.pulls) / peak) * 100) });
  const rows = minutes.map((m) => h("tr", {},
    h("td", { text: new Date(m.minute).toLocaleTimeString(lang, { hour: "2-digit", minute: "2-digit" }) }),
    h("td", { text: numbers.format(m.pushes) }), h("td", { text: numbers.format(m.pulls) }),
    h("td", { text: numbers.format(m.mutations) }), h("td", { text: numbers.format(m.records_pulled) }),
    h("td", { text: numbers.format(m.errors) }), h("td", { class: "bar-cell" }, bar(m))));
  const errors = report.errors.map((e) => h("tr", {},
    h("td", { text: time(e.at) }), h("td", { text: `${e.status} ${e.code || ""}` }), h("td", { text: `${e.method} ${e.route}` }),
    h("td", { text: e.user || t("none") }), h("td", { class: "client", text: e.request_id })));
  show(h("h2", { text: t("activity.heading") }), h("p", { text: t("activity.explain") }), messageBox(),
    h("p", { id: "live-now", role: "status", text: t("activity.live", { count: report.live.streams, polls: report.live.long_polls }) }),
    table("activity", t("activity.heading"), [t("col.minute"), t("col.pushes"), t("col.pulls"), t("col.mutations"),
      t("col.pulled"), t("col.errorsn"), ""], rows),
    h("h3", { text: t("activity.errors") }),
    errors.length ? table("errors", t("activity.errors"), [t("col.when"), t("col.code"), t("col.route"), t("col.user"), t("col.request")], errors)
      : h("p", { text: t("activity.noerrors") }));
  // Widths are set through the CSS object model: an inline style attribute would break the policy.
  for (const node of main.querySelectorAll(".bar")) node.style.width = `${node.dataset.width}%`;
  document.title = `${t("activity.heading")} · ${t("title")}`;
  activityTimer = setTimeout(async () => {
    if (parseHash().parts[0] !== "activity") return;
    try { await activityPage(); } catch (error) { if (error instanceof SignedOut) signedOut(); }
  }, 2000);
}

// MARK: Start

window.addEventListener("hashchange", () => { render(); main.focus({ preventScroll: true }); });

(async () => {
  try {
    session = await api("session");
  } catch {
    session = null;
  }
  render();
})();
