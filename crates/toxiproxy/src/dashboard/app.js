// The dashboard of `shape --serve`: the proxies, their toxics and what
// flows through them, read from the API once a second, and every change
// made through the API itself, whose own error is shown when it refuses.
// Served by shape with the page; nothing is fetched from elsewhere.
"use strict";

const POLL_MS = 1000;
// Seconds of history each graph shows.
const SECONDS = 60;

const kinds = new Map(); // toxic type -> its row of the table
let profiles = [];
const cards = new Map(); // proxy name -> its card
let polling = null;
// Only graphs on screen are drawn: a thousand proxies cost what a
// screenful does.
const onScreen = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const shown = cards.get(entry.target.dataset.name);
    if (!shown) continue;
    shown.visible = entry.isIntersecting;
    if (shown.visible) draw(shown.parts.graph, ratesOf(shown.samples), colours());
  }
});
let colourCache = null;

// ---- The API ----

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
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

// Runs `change`, says its error if it fails, and reads the state again.
async function attempt(change) {
  try {
    await change();
    say("");
  } catch (err) {
    say(err.message);
  }
  await poll();
}

function say(message) {
  const where = document.getElementById("message");
  where.textContent = message;
  where.hidden = message === "";
}

// ---- Confirmation ----

function confirmed(text, ok) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
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
  return (unit === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[unit];
}

function rate(n) {
  return bytes(n) + "/s";
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

// ---- A proxy's card ----

function card(name) {
  const parts = {};
  const root = element("article", { class: "proxy", "aria-label": "proxy " + name });
  parts.title = element("h3", { text: name });
  parts.badge = element("span", { class: "badge" });
  parts.route = element("p", { class: "route" });
  parts.flow = element("p", { class: "flow" });
  parts.up = element("span", { class: "rate up", "data-rate": "up" });
  parts.down = element("span", { class: "rate down", "data-rate": "down" });
  parts.connections = element("span", { class: "connections" });
  parts.flow.append("up ", parts.up, " · down ", parts.down, " · ", parts.connections);
  parts.graph = element("canvas", { class: "graph", height: "80", role: "img" });
  parts.peak = element("p", { class: "peak quiet" });
  parts.toggle = element("button", { type: "button" });
  parts.remove = element("button", { type: "button", class: "danger", text: "Delete" });
  parts.toxics = element("div", { class: "toxics" });
  parts.adding = element("details", { class: "add-toxic" }, element("summary", { text: "Add a toxic" }));
  parts.adding.addEventListener("toggle", () => {
    if (parts.adding.open && !parts.adding.querySelector("form")) {
      parts.adding.append(toxicForm(root.dataset.name, null));
    }
  });
  const head = element("div", { class: "head" }, parts.title, parts.badge);
  const actions = element("div", { class: "actions" }, parts.toggle, parts.remove);
  root.append(head, parts.route, parts.flow, parts.graph, parts.peak, actions, parts.toxics, parts.adding);
  root.dataset.name = name;
  parts.toggle.addEventListener("click", () => toggle(root.proxy));
  parts.remove.addEventListener("click", async () => {
    if (await confirmed(`Delete proxy ${name}? Its connections are closed.`, "Delete")) {
      attempt(() => api("DELETE", proxyPath(name)));
    }
  });
  onScreen.observe(root);
  return { root, parts, samples: [], toxicsShown: null, visible: false };
}

async function toggle(proxy) {
  const enable = !proxy.enabled;
  const text = enable
    ? `Enable proxy ${proxy.name}? It listens on ${proxy.listen} again.`
    : `Disable proxy ${proxy.name}? It stops listening and its connections are closed.`;
  if (await confirmed(text, enable ? "Enable" : "Disable")) {
    attempt(() => api("POST", proxyPath(proxy.name), { enabled: enable }));
  }
}

function update(shown, proxy, at) {
  const { root, parts } = shown;
  root.proxy = proxy;
  root.classList.toggle("disabled", !proxy.enabled);
  parts.badge.textContent = proxy.enabled ? "enabled" : "disabled";
  parts.route.textContent = `${proxy.protocol || "tcp"} ${proxy.listen} → ${proxy.upstream}`;
  parts.toggle.textContent = proxy.enabled ? "Disable" : "Enable";
  parts.connections.textContent =
    proxy.connections === null ? "datagrams" : `${proxy.connections} open`;
  shown.samples.push({ at, up: proxy.up, down: proxy.down });
  while (shown.samples.length > SECONDS + 1) {
    shown.samples.shift();
  }
  const rates = ratesOf(shown.samples);
  const now = rates[rates.length - 1] || { up: 0, down: 0 };
  parts.up.textContent = rate(now.up);
  parts.up.dataset.bytesPerSecond = Math.round(now.up);
  parts.down.textContent = rate(now.down);
  parts.down.dataset.bytesPerSecond = Math.round(now.down);
  parts.graph.setAttribute(
    "aria-label",
    `${proxy.name}: up ${rate(now.up)}, down ${rate(now.down)}, over the last ${SECONDS} seconds`
  );
  const peak = Math.max(0, ...rates.map((r) => Math.max(r.up, r.down)));
  parts.peak.textContent = `last ${SECONDS} s · peak ${rate(peak)}`;
  const toxics = JSON.stringify(proxy.toxics);
  // Left alone while one of its forms is being filled in.
  if (toxics !== shown.toxicsShown && !parts.toxics.querySelector("form")) {
    shown.toxicsShown = toxics;
    parts.toxics.replaceChildren(toxicTable(proxy));
  }
}

// Bytes a second between each pair of samples.
function ratesOf(samples) {
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const seconds = Math.max((samples[i].at - samples[i - 1].at) / 1000, 0.001);
    rates.push({
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
    colourCache = {
      up: styles.getPropertyValue("--up").trim() || "#b35900",
      down: styles.getPropertyValue("--down").trim() || "#0b63c4",
    };
  }
  return colourCache;
}

function draw(canvas, rates, colour) {
  const width = canvas.clientWidth || 300;
  const ratio = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(80 * ratio);
  }
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, 80);
  const most = Math.max(1, ...rates.map((r) => Math.max(r.up, r.down)));
  const step = width / SECONDS;
  for (const way of ["up", "down"]) {
    g.strokeStyle = colour[way];
    g.lineWidth = 2;
    g.beginPath();
    rates.forEach((r, i) => {
      const x = width - (rates.length - 1 - i) * step - 1;
      const y = 78 - (r[way] / most) * 74;
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    g.stroke();
  }
}

// ---- Toxics ----

function toxicTable(proxy) {
  if (proxy.toxics.length === 0) {
    return element("p", { class: "quiet", text: "No toxics." });
  }
  const body = element("tbody");
  for (const toxic of proxy.toxics) {
    const attributes = Object.entries(toxic.attributes)
      .map(([name, value]) => `${name}: ${value === "" ? "—" : value}`)
      .join(", ");
    const edit = element("button", { type: "button", text: "Edit" });
    const remove = element("button", { type: "button", class: "danger", text: "Remove" });
    const row = element(
      "tr",
      {},
      element("td", { text: toxic.name }),
      element("td", { text: `${toxic.type} (${toxic.stream})` }),
      element("td", { text: String(toxic.toxicity) }),
      element("td", { text: attributes }),
      element("td", { class: "row-actions" }, edit, remove)
    );
    edit.addEventListener("click", () => {
      const holder = element("td", { colspan: "5" });
      const editing = element("tr", {}, holder);
      holder.append(toxicForm(proxy.name, toxic, () => editing.remove()));
      row.after(editing);
      holder.querySelector("input, select").focus();
    });
    remove.addEventListener("click", () =>
      attempt(() =>
        api("DELETE", `${proxyPath(proxy.name)}/toxics/${encodeURIComponent(toxic.name)}`)
      )
    );
    body.append(row);
  }
  const head = element(
    "thead",
    {},
    element(
      "tr",
      {},
      ...["name", "type (stream)", "toxicity", "attributes", ""].map((h) =>
        element("th", { scope: "col", text: h })
      )
    )
  );
  return element("table", {}, element("caption", { text: "Toxics" }), head, body);
}

// A form that adds a toxic to proxy `name`, or edits `toxic`; `done`
// runs when it is sent or cancelled.
function toxicForm(name, toxic, done) {
  const form = element("form", { class: "toxic-form" });
  const type = element("select", { name: "type" });
  const proxy = cards.get(name) && cards.get(name).root.proxy;
  const protocol = (proxy && proxy.protocol) || "tcp";
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
  const cancel = element("button", { type: "button", text: "Cancel" });
  cancel.addEventListener("click", () => {
    form.remove();
    if (done) done();
  });
  form.append(
    element("label", {}, "Type ", type),
    element("label", {}, "Name ", toxicName),
    element("label", {}, "Stream ", stream),
    element("label", {}, "Toxicity ", toxicity),
    fields,
    element("div", { class: "buttons" }, element("button", { type: "submit", text: toxic ? "Save" : "Add" }), cancel)
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const attributes = {};
    for (const input of fields.querySelectorAll("[data-attribute]")) {
      const value = fieldValue(input);
      if (value !== undefined) attributes[input.dataset.attribute] = value;
    }
    const body = { attributes, toxicity: Number(toxicity.value) };
    const path = `${proxyPath(name)}/toxics`;
    attempt(async () => {
      if (toxic) {
        await api("POST", `${path}/${encodeURIComponent(toxic.name)}`, body);
      } else {
        body.type = type.value;
        body.stream = stream.value;
        if (toxicName.value) body.name = toxicName.value;
        await api("POST", path, body);
      }
      form.remove();
      if (done) done();
    });
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

// ---- The state, once a second ----

async function poll() {
  clearTimeout(polling);
  try {
    const state = await api("GET", "/ui/state");
    show(state);
  } catch (err) {
    document.getElementById("totals").textContent = "Not answering: " + err.message;
  }
  polling = setTimeout(poll, POLL_MS);
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
  // Drawn after every card is in place, so that sizes are laid out once.
  for (const shown of cards.values()) {
    if (shown.visible) draw(shown.parts.graph, ratesOf(shown.samples), colours());
  }
  document.getElementById("empty").hidden = state.proxies.length !== 0;
  const t = state.totals;
  const up = sum(cards, "up");
  const down = sum(cards, "down");
  document.getElementById("totals").textContent =
    `${state.proxies.length} proxies · ${t.connections} connections · ` +
    `up ${rate(up)} (${bytes(t.up)}) · down ${rate(down)} (${bytes(t.down)})`;
  document.body.dataset.ready = "1";
}

function sum(shownCards, way) {
  let total = 0;
  for (const shown of shownCards.values()) {
    const rates = ratesOf(shown.samples.slice(-2));
    if (rates.length) total += rates[0][way];
  }
  return total;
}

// ---- Start ----

async function start() {
  document.getElementById("new-proxy").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    const field = (name) => form.elements.namedItem(name);
    const body = {
      name: field("name").value,
      upstream: field("upstream").value,
      enabled: field("enabled").checked,
      protocol: field("protocol").value,
    };
    if (field("listen").value) body.listen = field("listen").value;
    attempt(async () => {
      await api("POST", "/proxies", body);
      form.reset();
    });
  });
  document.getElementById("reset").addEventListener("click", async () => {
    const text = "Reset everything? Every proxy is enabled and every toxic removed.";
    if (await confirmed(text, "Reset")) attempt(() => api("POST", "/reset"));
  });
  // Hidden, the page asks nothing.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) clearTimeout(polling);
    else poll();
  });
  try {
    const table = await api("GET", "/ui/toxics");
    for (const kind of table.kinds) kinds.set(kind.type, kind);
    profiles = table.profiles;
  } catch (err) {
    say("The toxics' table could not be read: " + err.message);
  }
  poll();
}

start();
