// The approvals page: lists waiting calls from GET /approvals every two
// seconds and answers them with POST /approvals/{id}. Everything shown is
// set as text (never as HTML): arguments are model output.
"use strict";

const $ = (id) => document.getElementById(id);
const shown = new Map();

// A message the person must act on stays until they do; the periodic
// refresh does not write over it.
let sticky = false;

function say(text, bad, keep) {
  const s = $("status");
  s.textContent = text;
  s.className = bad ? "bad" : "";
  sticky = !!keep;
}

function token() {
  return $("token").value.trim();
}

function pretty(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch (_) {
    return args;
  }
}

// Characters that change how text reads without being seen: bidirectional
// controls (a right-to-left override shows `rm -rf /` as something else),
// zero-width and other format characters, variation selectors (the
// supplement's too, U+E0100–E01EF), tags, control characters but tab and
// newline: toolgate's table of characters no reader counts, and more. Each
// is shown as a visible ⟨U+XXXX⟩ mark, so what a person reads is what the
// agent runs. (A unit test holds this class to that table.)
const HIDDEN = /[\u{0000}-\u{0008}\u{000B}-\u{001F}\u{007F}-\u{009F}\u{00AD}\u{034F}\u{061C}\u{115F}-\u{1160}\u{17B4}-\u{17B5}\u{180B}-\u{180F}\u{200B}-\u{200F}\u{202A}-\u{202E}\u{2060}-\u{206F}\u{3164}\u{FE00}-\u{FE0F}\u{FEFF}\u{FFA0}\u{FFF0}-\u{FFFB}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]/gu;

// `text` into `el` as text nodes, each hidden character as a marked span.
function visible(el, text) {
  text = String(text);
  let last = 0;
  for (const m of text.matchAll(HIDDEN)) {
    el.append(document.createTextNode(text.slice(last, m.index)));
    const cp = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    const mark = document.createElement("span");
    mark.className = "hidden-char";
    mark.title = "an invisible character in the text";
    mark.textContent = "⟨U+" + cp + "⟩";
    el.append(mark);
    last = m.index + m[0].length;
  }
  el.append(document.createTextNode(text.slice(last)));
}

function field(dl, name, value) {
  if (value === null || value === undefined || value === "") return;
  const dt = document.createElement("dt");
  dt.textContent = name;
  const dd = document.createElement("dd");
  visible(dd, value);
  dl.append(dt, dd);
}

function button(cls, text, q, decision, scope) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = text;
  b.addEventListener("click", () => answer(q, decision, scope));
  return b;
}

function item(q) {
  const li = document.createElement("li");
  li.className = "pending";
  li.dataset.id = q.id;
  const h = document.createElement("h2");
  visible(h, q.tool);
  const dl = document.createElement("dl");
  field(dl, "rule", q.rule);
  field(dl, "principal", q.principal);
  field(dl, "agent", q.agent);
  field(dl, "session", q.session);
  field(dl, "phase", q.phase);
  field(dl, "user asked", q.request);
  field(dl, "asked at", q.created);
  field(dl, "expires", q.expires);
  const pre = document.createElement("pre");
  pre.className = "arguments";
  visible(pre, pretty(q.arguments));
  const parts = [h, dl];
  if (q.arguments_clipped) {
    const warn = document.createElement("p");
    warn.className = "clipped";
    warn.textContent = "Only the first " + q.arguments.length + " characters of the arguments are shown: the call runs with all "
      + q.arguments_bytes + " bytes. Deny it unless you know what the rest holds.";
    parts.push(warn);
  }
  const actions = document.createElement("div");
  actions.className = "actions";
  actions.append(
    button("approve", "Approve", q, "approve", "call"),
    button("approve approve-session", "Approve for this session", q, "approve", "session"),
    button("deny", "Deny", q, "deny", "call"),
  );
  li.append(...parts, pre, actions);
  return li;
}

async function answer(q, decision, scope) {
  const by = $("by").value.trim();
  if (!by) {
    say("Enter your name first: every answer is audited with who gave it.", true, true);
    $("by").focus();
    return;
  }
  const li = shown.get(q.id);
  if (li) li.querySelectorAll("button").forEach((b) => (b.disabled = true));
  try {
    const r = await fetch("/approvals/" + encodeURIComponent(q.id), {
      method: "POST",
      headers: { "Authorization": "Bearer " + token(), "Content-Type": "application/json" },
      body: JSON.stringify({ decision, by, scope, digest: q.digest, channel: "ui" }),
    });
    const body = await r.json().catch(() => ({}));
    if (r.ok) {
      say((decision === "approve" ? "Approved " : "Denied ") + q.tool + ".", false);
    } else {
      say("Not answered: " + (body.error || r.status), true);
    }
  } catch (e) {
    say("Not answered: " + e, true);
  }
  refresh();
}

async function refresh() {
  if (!token()) return;
  let list;
  try {
    const r = await fetch("/approvals", { headers: { "Authorization": "Bearer " + token() } });
    if (r.status === 401) {
      say("The token was refused.", true);
      return;
    }
    if (!r.ok) {
      say("toolgate answered " + r.status, true);
      return;
    }
    list = (await r.json()).pending || [];
  } catch (e) {
    say("toolgate cannot be reached: " + e, true);
    return;
  }
  const ids = new Set(list.map((q) => q.id));
  for (const [id, li] of shown) {
    if (!ids.has(id)) {
      li.remove();
      shown.delete(id);
    }
  }
  for (const q of list) {
    if (!shown.has(q.id)) {
      const li = item(q);
      shown.set(q.id, li);
      $("pending").append(li);
    }
  }
  $("empty").hidden = list.length > 0;
  if (!sticky && ($("status").className !== "bad" || list.length)) {
    say(list.length + " waiting · updated " + new Date().toLocaleTimeString(), false);
  }
}

function start() {
  // A token in the address's fragment (never sent to a server) is taken
  // and removed from the address bar.
  const m = /(?:^|&)token=([^&]*)/.exec(location.hash.slice(1));
  if (m) {
    sessionStorage.setItem("toolgate-approval-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  $("token").value = sessionStorage.getItem("toolgate-approval-token") || "";
  $("by").value = localStorage.getItem("toolgate-approval-by") || "";
  $("token").addEventListener("change", () => {
    sessionStorage.setItem("toolgate-approval-token", token());
    refresh();
  });
  $("by").addEventListener("change", () => localStorage.setItem("toolgate-approval-by", $("by").value.trim()));
  $("by").addEventListener("input", () => {
    if (sticky && $("by").value.trim()) {
      sticky = false;
      refresh();
    }
  });
  $("who").addEventListener("submit", (e) => e.preventDefault());
  refresh();
  setInterval(refresh, 2000);
}

start();
