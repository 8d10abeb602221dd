// The dashboard of `shape --serve`: the proxies, their toxics and what
// flows through them, read from the API once a second, and every change
// made through the API itself, whose own error is shown beside what
// caused it. Served by shape with the page; nothing is fetched from
// elsewhere.
//
// A thousand proxies cost what a screenful does: a card is built when it
// first comes near the screen, and only cards on screen are written to
// and drawn; the others keep their samples.
"use strict";

const POLL_MS = 1000;
// Seconds of history each graph shows.
const SECONDS = 60;
// A call unanswered this long: the server is taken as gone.
const PATIENCE_MS = 4000;
// Samples closer than this to the last one are not kept: a state read
// for a change, just after the second's, would make a spike of noise.
const CLOSEST_MS = 500;
const GRAPH_HEIGHT = 96;

const kinds = new Map(); // toxic type -> its row of the table
let profiles = [];
const cards = new Map(); // proxy name -> its card
let history = new Map(); // proxy name -> samples, from the server, until its card takes them
let polling = null; // the next poll's timer
let reading = null; // the poll under way
let filter = "";
let goneSince = null;
let colourCache = null;

const onScreen = new IntersectionObserver(
  (entries) => {
    for (const entry of entries) {
      const shown = cards.get(entry.target.dataset.name);
      if (!shown) continue;
      shown.visible = entry.isIntersecting;
      if (shown.visible) refresh(shown);
    }
  },
  { rootMargin: "200px 0px" }
);

// ---- The API ----

async function api(method, path, body) {
  const init = { method, headers: {}, signal: AbortSignal.timeout(PATIENCE_MS) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new Error(
      err.name === "TimeoutError"
        ? `no answer in ${PATIENCE_MS / 1000} s`
        : "the server cannot be reached"
    );
  }
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch (_) {
    value = null;
  }
  if (!response.ok) {
    const said = value && value.error ? value.error : text.trim() || response.statusText;
    throw new Error(said);
  }
  return value;
}

function proxyPath(name) {
  return "/proxies/" + encodeURIComponent(name);
}

// ---- Errors, beside what caused them ----

function errorSlot() {
  const slot = element("p", { class: "error", role: "alert" });
  slot.hidden = true;
  return slot;
}

function tell(slot, message) {
  slot.textContent = message;
  slot.hidden = message === "";
  if (message) slot.scrollIntoView({ block: "nearest" });
}

// Runs `change`; says its error in `slot`, or clears it; reads the
// state again. True if the change went through.
async function attempt(change, slot) {
  let done = true;
  try {
    await change();
    tell(slot, "");
  } catch (err) {
    done = false;
    tell(slot, err.message);
  }
  await poll();
  return done;
}

// ---- Confirmation ----

// Asks `text`; focus goes back to `from` after (or to the proxies'
// heading, if `from` is gone by then).
function confirmed(text, ok, from) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        resolve(dialog.returnValue === "ok");
        focusBack(from);
      },
      { once: true }
    );
    dialog.showModal();
  });
}

function focusBack(from) {
  // After the change's state is read, the element may have been replaced
  // or removed: the next frame's is the one to focus.
  requestAnimationFrame(() => {
    if (from && from.isConnected) from.focus();
    else document.getElementById("proxies-title").focus();
  });
}

// ---- Units ----

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit += 1;
  }
  return (unit === 0 ? n.toFixed(0) : n.toFixed(1).replace(/\.0$/, "")) + " " + units[unit];
}

function rate(n) {
  return bytes(n) + "/s";
}

// The least of 1, 2 or 5 times a power of 1024's steps at or above `n`:
// a scale whose labels read as round numbers.
function roundAbove(n) {
  let unit = 1;
  while (n >= unit * 1024) unit *= 1024;
  for (const step of [1, 2, 5, 10, 20, 50, 100, 200, 500, 1024]) {
    if (step * unit >= n) return step * unit;
  }
  return 1024 * unit;
}

function element(tag, attributes, ...children) {
  const made = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name === "text") {
      made.textContent = value;
    } else if (name.startsWith("on")) {
      made.addEventListener(name.slice(2), value);
    } else {
      made.setAttribute(name, value);
    }
  }
  for (const child of children) {
    made.append(child);
  }
  return made;
}

// Sets `node`'s text only when it changes: a write costs a layout.
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// ---- A proxy's card ----

// A card holds its proxy's samples from the start, and is built when it
// first comes near the screen.
function card(name) {
  const root = element("article", { class: "proxy", "aria-label": "proxy " + name });
  root.dataset.name = name;
  root.append(element("h3", { text: name }));
  const shown = { root, parts: null, proxy: null, samples: [], toxicsShown: null, visible: false };
  shown.samples = history.get(name) || [];
  history.delete(name);
  root.hidden = !matches(name);
  onScreen.observe(root);
  return shown;
}

function build(shown) {
  const { root } = shown;
  const name = root.dataset.name;
  const parts = {};
  parts.title = element("h3", { text: name });
  parts.badge = element("span", { class: "badge" });
  parts.route = element("p", { class: "route" });
  parts.flow = element("p", { class: "flow" });
  parts.up = element("span", { class: "rate up", "data-rate": "up" });
  parts.down = element("span", { class: "rate down", "data-rate": "down" });
  parts.count = element("span", { class: "count" });
  parts.flow.append("up ", parts.up, " · down ", parts.down, " · ", parts.count);
  parts.graph = element("canvas", { class: "graph", height: String(GRAPH_HEIGHT), role: "img" });
  parts.span = element(
    "p",
    { class: "span quiet" },
    element("span", { text: `−${SECONDS} s` }),
    element("span", { class: "peak" }),
    element("span", { text: "now" })
  );
  parts.peak = parts.span.querySelector(".peak");
  parts.toggle = element("button", { type: "button" });
  parts.remove = element("button", { type: "button", class: "danger", text: "Delete" });
  parts.actionError = errorSlot();
  parts.toxics = element("div", { class: "toxics" });
  parts.toxicError = errorSlot();
  parts.adding = element("details", { class: "add-toxic" }, element("summary", { text: "Add a toxic" }));
  parts.adding.addEventListener("toggle", () => {
    if (parts.adding.open && !parts.adding.querySelector("form")) {
      const summary = parts.adding.querySelector("summary");
      const form = toxicForm(name, null, () => {
        parts.adding.open = false;
        summary.focus();
      });
      parts.adding.append(form);
      form.querySelector("select, input").focus();
    } else if (!parts.adding.open) {
      const form = parts.adding.querySelector("form");
      if (form) form.remove();
    }
  });
  const head = element("div", { class: "head" }, parts.title, parts.badge);
  const actions = element("div", { class: "actions" }, parts.toggle, parts.remove);
  root.replaceChildren(
    head, parts.route, parts.flow, parts.graph, parts.span, actions, parts.actionError,
    parts.toxics, parts.toxicError, parts.adding
  );
  parts.toggle.addEventListener("click", () => toggle(shown));
  parts.remove.addEventListener("click", async () => {
    const text = `Delete proxy ${name}? Its connections are closed.`;
    if (await confirmed(text, "Delete", parts.remove)) {
      attempt(() => api("DELETE", proxyPath(name)), parts.actionError);
    }
  });
  shown.parts = parts;
}

async function toggle(shown) {
  const proxy = shown.proxy;
  const enable = !proxy.enabled;
  const text = enable
    ? `Enable proxy ${proxy.name}? It listens on ${proxy.listen} again.`
    : `Disable proxy ${proxy.name}? It stops listening and its connections are closed.`;
  if (await confirmed(text, enable ? "Enable" : "Disable", shown.parts.toggle)) {
    attempt(() => api("POST", proxyPath(proxy.name), { enabled: enable }), shown.parts.actionError);
  }
}

// Takes the proxy as the server shows it at `at`, and shows it if its
// card is on screen.
function update(shown, proxy, at) {
  shown.proxy = proxy;
  const samples = shown.samples;
  const last = samples[samples.length - 1];
  if (!last || at - last.at >= CLOSEST_MS) samples.push({ at, up: proxy.up, down: proxy.down });
  // The minute, and the sample before it, which its first rate needs.
  while (samples.length > 2 && samples[1].at <= at - SECONDS * 1000) samples.shift();
  if (shown.visible && !shown.root.hidden) refresh(shown);
}

// Writes the card from its proxy and samples.
function refresh(shown) {
  const proxy = shown.proxy;
  if (!proxy) return;
  if (!shown.parts) build(shown);
  const { root, parts } = shown;
  root.classList.toggle("disabled", !proxy.enabled);
  setText(parts.badge, proxy.enabled ? "enabled" : "disabled");
  setText(parts.route, `${proxy.protocol || "tcp"} ${proxy.listen} → ${proxy.upstream}`);
  setText(parts.toggle, proxy.enabled ? "Disable" : "Enable");
  setText(parts.count, countOf(proxy));
  const rates = ratesOf(shown.samples);
  const now = rates.length ? rates[rates.length - 1] : { up: 0, down: 0 };
  setText(parts.up, rate(now.up));
  parts.up.dataset.bytesPerSecond = Math.round(now.up);
  setText(parts.down, rate(now.down));
  parts.down.dataset.bytesPerSecond = Math.round(now.down);
  const peak = Math.max(0, ...rates.map((r) => Math.max(r.up, r.down)));
  setText(parts.peak, `peak ${rate(peak)}`);
  const top = draw(parts.graph, rates, shown.samples, colours());
  parts.graph.setAttribute(
    "aria-label",
    `${proxy.name}: up ${rate(now.up)}, down ${rate(now.down)}, peak ${rate(peak)} ` +
      `over the last ${SECONDS} seconds; the scale's top is ${rate(top)}`
  );
  parts.graph.dataset.scale = rate(top);
  const first = shown.samples[0];
  parts.graph.dataset.seconds = first ? Math.round((lastAt(shown) - first.at) / 1000) : 0;
  const toxics = JSON.stringify(proxy.toxics);
  // Left alone while one of its forms is being filled in.
  if (toxics !== shown.toxicsShown && !parts.toxics.querySelector("form")) {
    shown.toxicsShown = toxics;
    showToxics(parts.toxics, toxicList(shown));
  }
}

function lastAt(shown) {
  return shown.samples.length ? shown.samples[shown.samples.length - 1].at : 0;
}

// A TCP proxy's open connections, or a UDP proxy's live flows: numbers.
function countOf(proxy) {
  if (proxy.protocol === "udp") {
    const flows = proxy.flows || 0;
    return `${flows} ${flows === 1 ? "flow" : "flows"}`;
  }
  return `${proxy.connections || 0} open`;
}

// Bytes a second between each pair of samples, at the later one's time.
function ratesOf(samples) {
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const seconds = Math.max((samples[i].at - samples[i - 1].at) / 1000, 0.001);
    rates.push({
      at: samples[i].at,
      up: Math.max(samples[i].up - samples[i - 1].up, 0) / seconds,
      down: Math.max(samples[i].down - samples[i - 1].down, 0) / seconds,
    });
  }
  return rates;
}

// The graph's colours, read from the style once.
function colours() {
  if (!colourCache) {
    const styles = getComputedStyle(document.documentElement);
    const read = (name, otherwise) => styles.getPropertyValue(name).trim() || otherwise;
    colourCache = {
      up: read("--up", "#b35900"),
      down: read("--down", "#0b63c4"),
      grid: read("--line", "#cfd5db"),
      label: read("--quiet", "#5c6670"),
    };
  }
  return colourCache;
}

// Draws `rates` over the last minute, each at its time, under a scale
// from 0 to a round top with its labels; returns the top.
function draw(canvas, rates, samples, colour) {
  const width = canvas.clientWidth || 300;
  const height = GRAPH_HEIGHT;
  const ratio = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const most = Math.max(0, ...rates.map((r) => Math.max(r.up, r.down)));
  const top = roundAbove(Math.max(most, 1024));
  const left = 4;
  const plotTop = 14;
  const plotBottom = height - 4;
  const y = (value) => plotBottom - (value / top) * (plotBottom - plotTop);
  g.font = "11px system-ui, sans-serif";
  g.lineWidth = 1;
  g.textBaseline = "bottom";
  for (const [value, label] of [[top, rate(top)], [top / 2, rate(top / 2)], [0, "0"]]) {
    g.strokeStyle = colour.grid;
    g.beginPath();
    g.moveTo(left, Math.round(y(value)) + 0.5);
    g.lineTo(width, Math.round(y(value)) + 0.5);
    g.stroke();
    g.fillStyle = colour.label;
    g.fillText(label, left, Math.round(y(value)) - 1);
  }
  const end = samples.length ? samples[samples.length - 1].at : 0;
  const x = (at) => width - 1 - ((end - at) / (SECONDS * 1000)) * (width - left - 1);
  for (const way of ["up", "down"]) {
    g.strokeStyle = colour[way];
    g.lineWidth = 2;
    g.beginPath();
    rates.forEach((r, i) => {
      const at = Math.max(r.at, end - SECONDS * 1000);
      if (i === 0) g.moveTo(x(at), y(r[way]));
      else g.lineTo(x(at), y(r[way]));
    });
    g.stroke();
  }
  return top;
}

// ---- Toxics ----

// Replaces what `holder` shows with `list`, keeping focus where it was:
// on the same button of the same toxic, or on the card's "Add a toxic"
// if that toxic is gone.
function showToxics(holder, list) {
  const focused = document.activeElement;
  const within = focused && holder.contains(focused) ? focused.closest("[data-toxic]") : null;
  const action = within && focused.dataset.action;
  const toxic = within && within.dataset.toxic;
  holder.replaceChildren(list);
  if (!within) return;
  const again = [...holder.querySelectorAll("[data-toxic]")].find((row) => row.dataset.toxic === toxic);
  const target = again && again.querySelector(`[data-action="${action}"]`);
  if (target) target.focus();
  else holder.closest(".proxy").querySelector(".add-toxic summary").focus();
}

// A toxic's attributes as `name value unit`, its unit short.
function attributeText(type, name, value) {
  const kind = kinds.get(type);
  const attribute = kind && kind.attributes.find((a) => a.name === name);
  if (value === "" || value === null || value === undefined) return "—";
  if (!attribute) return String(value);
  if (attribute.input === "flag") return Number(value) === 1 ? "yes" : "no";
  if (attribute.input === "whole") return `${value} ${attribute.unit.split(" ")[0]}`;
  return String(value);
}

function toxicList(shown) {
  const proxy = shown.proxy;
  if (proxy.toxics.length === 0) {
    return element("p", { class: "quiet", text: "No toxics." });
  }
  const list = element("ul", { class: "toxic-list", "aria-label": `toxics of ${proxy.name}` });
  for (const toxic of proxy.toxics) {
    const attributes = element("dl", { class: "attributes" });
    for (const [name, value] of Object.entries(toxic.attributes)) {
      attributes.append(
        element("div", {}, element("dt", { text: name }), element("dd", { text: attributeText(toxic.type, name, value) }))
      );
    }
    if (toxic.requests) {
      // What an http toxic's rule has seen, matched and picked so far.
      const { seen, matched, picked } = toxic.requests;
      attributes.append(
        element("div", { class: "requests" }, element("dt", { text: "requests" }),
          element("dd", { text: `seen ${seen} · matched ${matched} · picked ${picked}` }))
      );
    }
    const edit = element("button", { type: "button", text: "Edit", "data-action": "edit", "aria-expanded": "false" });
    const remove = element("button", { type: "button", class: "danger", text: "Remove", "data-action": "remove" });
    const item = element(
      "li",
      { class: "toxic" },
      element(
        "div",
        { class: "toxic-head" },
        element("strong", { text: toxic.name }),
        element("span", { class: "quiet", text: `${toxic.type} · ${toxic.stream} · toxicity ${toxic.toxicity}` })
      ),
      attributes,
      element("div", { class: "row-actions" }, edit, remove)
    );
    item.dataset.toxic = toxic.name;
    edit.addEventListener("click", () => openEdit(shown, item, toxic, edit));
    remove.addEventListener("click", async () => {
      const text = `Remove toxic ${toxic.name} from proxy ${proxy.name}?`;
      if (await confirmed(text, "Remove", remove)) {
        const path = `${proxyPath(proxy.name)}/toxics/${encodeURIComponent(toxic.name)}`;
        attempt(() => api("DELETE", path), shown.parts.toxicError);
      }
    });
    list.append(item);
  }
  return list;
}

// One edit form per card: Edit on a toxic whose form is open goes back
// into it; on another toxic, the open one is closed first.
function openEdit(shown, item, toxic, edit) {
  const open = shown.parts.toxics.querySelector("form");
  if (open && open.closest("[data-toxic]") === item) {
    open.querySelector("input:not([disabled]), select:not([disabled])").focus();
    return;
  }
  // Closed for another: focus goes into the new form, not back.
  if (open) open.cancel({ refocus: false });
  const form = toxicForm(shown.proxy.name, toxic, (refocus) => {
    edit.setAttribute("aria-expanded", "false");
    if (refocus) focusBack(edit);
  });
  edit.setAttribute("aria-expanded", "true");
  item.append(form);
  form.querySelector("input:not([disabled]), select:not([disabled])").focus();
}

// A form that adds a toxic to proxy `name`, or edits `toxic`; `done`
// runs when it is sent or cancelled, after it is removed, told whether
// focus is to go back to what opened it.
function toxicForm(name, toxic, done) {
  const form = element("form", { class: "toxic-form" });
  const type = element("select", { name: "type" });
  const shown = cards.get(name);
  const protocol = (shown && shown.proxy && shown.proxy.protocol) || "tcp";
  for (const kind of kinds.values()) {
    if (kind.on === "both" || kind.on === protocol) {
      type.append(element("option", { value: kind.type, text: kind.type }));
    }
  }
  const fields = element("div", { class: "fields" });
  const toxicName = element("input", { name: "name", autocomplete: "off", placeholder: "type_stream" });
  const stream = element("select", { name: "stream" });
  for (const s of ["downstream", "upstream"]) {
    stream.append(element("option", { value: s, text: s }));
  }
  const toxicity = element("input", {
    name: "toxicity", type: "number", min: "0", max: "1", step: "any", value: "1",
  });
  if (toxic) {
    type.value = toxic.type;
    type.disabled = true;
    toxicName.value = toxic.name;
    toxicName.disabled = true;
    stream.value = toxic.stream.toLowerCase();
    stream.disabled = true;
    toxicity.value = toxic.toxicity;
  }
  const refill = () => {
    fields.replaceChildren(...attributeFields(kinds.get(type.value), toxic && toxic.attributes));
  };
  type.addEventListener("change", refill);
  refill();
  const slot = errorSlot();
  const finish = ({ refocus = true } = {}) => {
    form.remove();
    if (done) done(refocus);
  };
  form.cancel = finish;
  const cancel = element("button", { type: "button", text: "Cancel", onclick: () => finish() });
  form.append(
    element("label", {}, "Type ", type),
    element("label", {}, "Name ", toxicName),
    element("label", {}, "Stream ", stream),
    element("label", {}, "Toxicity ", toxicity),
    fields,
    slot,
    element("div", { class: "buttons" }, element("button", { type: "submit", text: toxic ? "Save" : "Add" }), cancel)
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const attributes = {};
    for (const input of fields.querySelectorAll("[data-attribute]")) {
      const value = fieldValue(input);
      if (value !== undefined) attributes[input.dataset.attribute] = value;
    }
    const body = { attributes, toxicity: Number(toxicity.value) };
    const path = `${proxyPath(name)}/toxics`;
    const sent = await attempt(async () => {
      if (toxic) {
        await api("POST", `${path}/${encodeURIComponent(toxic.name)}`, body);
      } else {
        body.type = type.value;
        body.stream = stream.value;
        if (toxicName.value) body.name = toxicName.value;
        await api("POST", path, body);
      }
    }, slot);
    if (sent) finish();
  });
  return form;
}

// One input per attribute of `kind`, with its unit and default (or the
// toxic's value when editing). shape's extras are optional: left empty,
// they are not sent.
function attributeFields(kind, values) {
  return kind.attributes.map((attribute) => {
    const given = values && attribute.name in values ? values[attribute.name] : undefined;
    const value = given !== undefined ? given : attribute.default;
    let input;
    if (attribute.input === "flag") {
      input = element("input", { type: "checkbox" });
      input.checked = Number(value) === 1;
    } else if (attribute.input === "profile") {
      input = element("select", {}, element("option", { value: "", text: "(none)" }));
      for (const name of profiles) input.append(element("option", { value: name, text: name }));
      input.value = value === undefined || value === null ? "" : value;
    } else if (attribute.input === "text") {
      input = element("input", { type: "text", autocomplete: "off" });
      input.value = value === undefined || value === null ? "" : value;
    } else {
      input = element("input", { type: "number", step: attribute.input === "probability" ? "any" : "1" });
      if (attribute.input === "probability") {
        input.min = "0";
        input.max = "1";
      }
      input.value = value === undefined || value === null ? "" : value;
    }
    input.dataset.attribute = attribute.name;
    input.dataset.input = attribute.input;
    input.dataset.optional = attribute.extra ? "1" : "";
    input.dataset.given = given !== undefined ? "1" : "";
    const unit = attribute.extra ? `${attribute.unit}, optional` : attribute.unit;
    return element("label", {}, `${attribute.name} (${unit}) `, input);
  });
}

function fieldValue(input) {
  switch (input.dataset.input) {
    case "flag":
      // An optional flag the toxic has is turned off by sending 0.
      if (input.checked) return 1;
      return input.dataset.optional && !input.dataset.given ? undefined : 0;
    case "profile":
    case "text":
      return input.value;
    default:
      if (input.value === "") return input.dataset.optional ? undefined : 0;
      return Number(input.value);
  }
}

// ---- The filter ----

function matches(name) {
  return filter === "" || name.toLowerCase().includes(filter);
}

function applyFilter() {
  let shownCount = 0;
  for (const [name, shown] of cards) {
    const hide = !matches(name);
    if (shown.root.hidden !== hide) shown.root.hidden = hide;
    if (!hide) shownCount += 1;
  }
  const said = filter === "" ? "" : `${shownCount} of ${cards.size} shown`;
  setText(document.getElementById("filter-count"), said);
}

// ---- The state, once a second ----

// Reads the state now; a read under way is waited for, not doubled.
async function poll() {
  clearTimeout(polling);
  while (reading) await reading;
  reading = readState();
  await reading;
  reading = null;
  clearTimeout(polling);
  if (!document.hidden) polling = setTimeout(poll, POLL_MS);
}

async function readState() {
  try {
    const state = await api("GET", "/ui/state");
    back();
    show(state);
  } catch (err) {
    gone(err.message);
  }
}

// The server answers no more: every card greyed, and what is shown is
// said to be what it last was.
function gone(why) {
  if (goneSince === null) goneSince = new Date();
  document.body.classList.add("gone");
  for (const id of ["proxies", "create", "reset"]) document.getElementById(id).inert = true;
  setText(
    document.getElementById("totals"),
    `Not answering since ${goneSince.toLocaleTimeString()} (${why}): shown as it last was.`
  );
}

function back() {
  if (goneSince === null) return;
  goneSince = null;
  document.body.classList.remove("gone");
  for (const id of ["proxies", "create", "reset"]) document.getElementById(id).inert = false;
}

function show(state) {
  const list = document.getElementById("proxies");
  const seen = new Set();
  let previous = null;
  for (const proxy of state.proxies) {
    seen.add(proxy.name);
    let shown = cards.get(proxy.name);
    if (!shown) {
      shown = card(proxy.name);
      cards.set(proxy.name, shown);
    }
    update(shown, proxy, state.at);
    // In the server's order (by name), moving only what is out of place.
    const want = previous ? previous.nextSibling : list.firstChild;
    if (want !== shown.root) list.insertBefore(shown.root, want);
    previous = shown.root;
  }
  for (const [name, shown] of cards) {
    if (!seen.has(name)) {
      onScreen.unobserve(shown.root);
      shown.root.remove();
      cards.delete(name);
    }
  }
  history.clear();
  document.getElementById("empty").hidden = state.proxies.length !== 0;
  applyFilter();
  const t = state.totals;
  let up = 0;
  let down = 0;
  for (const shown of cards.values()) {
    const rates = ratesOf(shown.samples.slice(-2));
    if (rates.length) {
      up += rates[0].up;
      down += rates[0].down;
    }
  }
  setText(
    document.getElementById("totals"),
    `${state.proxies.length} proxies · ${t.connections} connections · ` +
      `up ${rate(up)} (${bytes(t.up)}) · down ${rate(down)} (${bytes(t.down)})`
  );
  document.body.dataset.ready = "1";
}

// ---- Start ----

async function start() {
  const create = document.getElementById("create");
  const createForm = document.getElementById("new-proxy");
  const createSlot = errorSlot();
  createForm.querySelector("button[type=submit]").before(createSlot);
  create.addEventListener("toggle", () => {
    if (create.open) createForm.elements.namedItem("name").focus();
    else tell(createSlot, "");
  });
  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const field = (name) => createForm.elements.namedItem(name);
    const body = {
      name: field("name").value,
      upstream: field("upstream").value,
      enabled: field("enabled").checked,
      protocol: field("protocol").value,
    };
    if (field("listen").value) body.listen = field("listen").value;
    const made = await attempt(() => api("POST", "/proxies", body), createSlot);
    if (made) {
      createForm.reset();
      create.open = false;
      create.querySelector("summary").focus();
    }
  });
  const reset = document.getElementById("reset");
  const resetSlot = errorSlot();
  reset.after(resetSlot);
  reset.addEventListener("click", async () => {
    const text = "Reset everything? Every proxy is enabled and every toxic removed.";
    if (await confirmed(text, "Reset", reset)) attempt(() => api("POST", "/reset"), resetSlot);
  });
  document.getElementById("filter").addEventListener("input", (event) => {
    filter = event.target.value.trim().toLowerCase();
    applyFilter();
  });
  // Hidden, the page asks nothing.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) clearTimeout(polling);
    else poll();
  });
  const [table, past] = await Promise.allSettled([api("GET", "/ui/toxics"), api("GET", "/ui/history")]);
  if (table.status === "fulfilled") {
    for (const kind of table.value.kinds) kinds.set(kind.type, kind);
    profiles = table.value.profiles;
  } else {
    tell(document.getElementById("message"), "The toxics' table could not be read: " + table.reason.message);
  }
  if (past.status === "fulfilled") {
    for (const [name, samples] of Object.entries(past.value.proxies)) {
      history.set(name, samples.map(([at, up, down]) => ({ at, up, down })));
    }
  }
  poll();
}

start();
