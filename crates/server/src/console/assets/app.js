// The console page: signs in with a Kubernetes token, lists a namespace's chats, and for the
// chosen chat shows its plugins' instances (with Stop), the composer switches, the panes of the
// plugins its project enables and the card drawer (sandboxed frames of the bundles' signed
// links, each the far end of a bridge), the agents' tool calls waiting for a person (approve
// once, always, or deny), and the chat's agent runs. It lists again on plugins.changed and on
// each approval asked or decided. Everything goes through the host API with the user's token.

import { HostApi, HostError } from "./api.js";
import {
  ANSWERS, decisionText, forChat, inputText, pendingByChat, refusalText, timeLeft,
} from "./approvals.js";
import { entries, isLive, pluginsWithRuns, runFor } from "./agent_view.js";
import { bridgeFrame } from "./bridge.js";
import {
  add, initialLayout, layoutKey, menu, panelOf, readLayout, userOf, writeLayout,
} from "./layout.js";
import { runSteps, summary } from "./commands.js";
import { frameHandlers, memoryState, paneState } from "./frames.js";
import { editOf, fieldOf, shown } from "./settings_form.js";
import { reviewRows, reviewSummary, upgradeBody } from "./plugin_upgrade.js";
import { SwitchBook, switchKey } from "./switches.js";
import { optionsFrom, optionsSummary } from "./task_options.js";
import { applyTheme, theme } from "./theme.js";
import { ago, fill, h } from "./dom.js";

const TOKEN_KEY = "loop-console:token";
const NAMESPACE_KEY = "loop-console:namespace";
const CHAT_KEY = "loop-console:chat";
const SCHEME_KEY = "loop-console:scheme";
/** How often the drawer, the unread counts and the runs are read again. */
const POLL_MS = 4000;
const CARD_HEIGHT = 160;
/** A frame's link is swapped for a fresh one this long (seconds) before it expires. */
const RENEW_BEFORE = 300;

/** Whether a link expiring at `expires` (unix seconds) is due for a fresh one. */
function due(expires) {
  return typeof expires === "number" && expires - Date.now() / 1000 < RENEW_BEFORE;
}

const $ = (id) => document.getElementById(id);

/** What the page holds; window.loopConsole shows it to the tests. */
const state = {
  api: null,
  /** `chat/plugin/action` → the options a New task asked for, set once the task exists. */
  pendingOptions: new Map(),
  chats: [],
  chat: null,
  /** plugin → why it can no longer be used in the chat (removed, disabled). */
  gone: new Map(),
  /** pane key (layout.js) → {section, frame, bridge, note, expires}; frame and bridge are
   * null for a kept pane whose plugin no longer runs here */
  panes: new Map(),
  /** The panels the chat's plugins offer, in the add-pane menu's order. */
  panels: [],
  /** card id → {article, frame, bridge} */
  cards: new Map(),
  // plugin → the Loop events its frames get as the bridge's `event` (what it subscribes to).
  events: new Map(),
  scheme: "light",
  follow: null,
  poll: 0,
  changes: [],
  /** The switches' clicks, so a list read meanwhile does not undo them (switches.js). */
  switchBook: new SwitchBook(),
  /** switch key → the pill on the page now: {s, show, button} */
  switchPills: new Map(),
  /** The namespace's approvals as the host API lists them (approvals.js reads them). */
  approvals: [],
  /** Why the approvals cannot be listed (RBAC), or null. */
  approvalsRefused: null,
  /** approval name → its card while it waits: {article, reason, left, buttons} */
  approvalCards: new Map(),
  followApprovals: null,
  /** The chosen chat's stream of UI commands, and why it cannot be followed (RBAC), or null. */
  followCommands: null,
  commandsRefused: null,
  /** The UI commands carried out here, newest last: {id, plugin, steps, answer}. */
  commands: [],
  /** The chat's agent runs as last listed, newest first. */
  runs: [],
  /** Settings → Plugins: the project's view as last read, and the config shown. */
  settings: null,
  settingsScope: "project",
  /** The plugins whose form the person has changed and not saved: kept when listed again. */
  settingsTouched: new Set(),
  /** Which read of the settings is the newest: an older answer arriving late is dropped. */
  settingsRead: 0,
  /** The countdown of the waiting calls (each second). */
  tick: 0,
  ready: false,
};
window.loopConsole = state;

// ---- sign-in --------------------------------------------------------------------------------

/** The token and namespace the URL's fragment gives (never sent to the server), then forgets it. */
function fromFragment() {
  if (!location.hash.includes("token=") && !location.hash.includes("namespace=")) return;
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  const namespace = params.get("namespace");
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  if (namespace) sessionStorage.setItem(NAMESPACE_KEY, namespace);
  history.replaceState(null, "", location.pathname + location.search);
}

function showSignIn(message = "") {
  stopFollowing();
  $("console").hidden = true;
  $("namespace-form").hidden = true;
  $("sign-out").hidden = true;
  $("signin").hidden = false;
  $("signin-namespace").value = sessionStorage.getItem(NAMESPACE_KEY) ?? "";
  $("signin-error").textContent = message;
  $("token").focus();
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  state.api = null;
  clearChat();
  showSignIn(message);
}

async function start() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const namespace = sessionStorage.getItem(NAMESPACE_KEY);
  if (!token || !namespace) return showSignIn();
  state.api = new HostApi(token, namespace);
  $("signin").hidden = true;
  $("console").hidden = false;
  $("namespace-form").hidden = false;
  $("sign-out").hidden = false;
  $("namespace").value = namespace;
  status("");
  try {
    await loadChats();
  } catch (e) {
    if (e instanceof HostError && e.status === 401) {
      return signOut(`The cluster does not accept this token: ${e.message}`);
    }
    status(e.message, true);
  }
  const remembered = sessionStorage.getItem(CHAT_KEY);
  const first = state.chats.find((c) => c.name === remembered)
    ?? state.chats.find((c) => !c.hidden && c.plugins.length > 0)
    ?? state.chats.find((c) => !c.hidden);
  await loadApprovals();
  if (first) await selectChat(first.name);
  follow();
  followApprovals();
  clearInterval(state.poll);
  state.poll = setInterval(poll, POLL_MS);
  clearInterval(state.tick);
  state.tick = setInterval(tickApprovals, 1000);
  state.ready = true;
}

// ---- chats ----------------------------------------------------------------------------------

async function loadChats() {
  const { chats } = await state.api.get(state.api.ns("/chats"));
  state.chats = chats;
  renderChatList();
  const chat = current();
  if (chat) renderInstances(chat);
}

function current() {
  return state.chats.find((c) => c.name === state.chat) ?? null;
}

/**
 * Renders into `container` only when `model` changed since its last rendering, and keeps the
 * keyboard's place: the focused element's successor (same `data-focus-key`) gets the focus.
 */
function render(container, model, build) {
  const text = JSON.stringify(model);
  if (container.dataset.model === text) return;
  container.dataset.model = text;
  const active = document.activeElement;
  const key = container.contains(active) ? active?.dataset?.focusKey : undefined;
  build();
  if (key) {
    const again = [...container.querySelectorAll("[data-focus-key]")]
      .find((el) => el.dataset.focusKey === key);
    again?.focus();
  }
}

function renderChatList() {
  const waiting = pendingByChat(state.approvals);
  const model = [state.chat,
    state.chats.map((c) => [c.name, c.kind, c.hidden, c.unread, waiting.get(c.name) ?? 0])];
  render($("chat-list"), model, () => fillChatList(waiting));
}

function fillChatList(waiting) {
  const items = state.chats
    .filter((c) => !c.hidden)
    .map((c) => {
      const label = c.kind === "channel" ? `# ${c.name}` : `↳ ${c.name}`;
      const unread = c.unread > 0
        ? h("span", { class: "badge", "aria-label": `${c.unread} unread` }, String(c.unread))
        : null;
      const asks = waiting.get(c.name) ?? 0;
      const waits = asks > 0
        ? h("span", {
          class: "badge waiting",
          title: `${asks} tool call${asks === 1 ? "" : "s"} waiting for approval`,
          "aria-label": `${asks} waiting for approval`,
        }, `${asks} waiting`)
        : null;
      return h("li", {},
        h("button", {
          type: "button",
          class: `chat-button ${c.kind}`,
          "aria-current": c.name === state.chat ? "page" : false,
          dataset: { chat: c.name, focusKey: `chat:${c.name}` },
          onclick: () => selectChat(c.name),
        }, h("span", { class: "chat-name" }, label), waits, unread));
    });
  fill($("chat-list"), items.length ? items : h("li", { class: "empty" }, "No chats"));
}

async function selectChat(name) {
  if (state.chat !== name) clearChat();
  state.chat = name;
  sessionStorage.setItem(CHAT_KEY, name);
  renderChatList();
  const chat = current();
  if (!chat) return;
  $("chat-title").textContent = chat.kind === "channel" ? `# ${chat.name}` : chat.name;
  const parent = chat.parent ? `, in # ${chat.parent}` : "";
  $("chat-meta").textContent = `${chat.kind}${parent} · project ${chat.project} · ${chat.app}`;
  $("settings-open").disabled = false;
  renderInstances(chat);
  renderApprovals();
  await Promise.all([loadSwitches(chat), loadPanes(chat), loadDrawer(), loadNotifications(), loadRuns(),
    loadTasks()]);
  followCommands(chat.name);
}

function clearChat() {
  for (const pane of state.panes.values()) {
    closeAgentView(pane);
    pane.bridge?.close();
  }
  for (const card of state.cards.values()) card.bridge?.close();
  state.panes.clear();
  state.panels = [];
  state.runs = [];
  state.cards.clear();
  state.gone.clear();
  state.events.clear();
  state.approvalCards.clear();
  for (const id of ["panes", "add-pane-list", "tasks", "cards", "notifications", "switches", "plugins", "runs", "approvals", "decided"]) {
    fill($(id));
    delete $(id).dataset.model;
  }
}

// ---- instances ------------------------------------------------------------------------------

function renderInstances(chat) {
  const model = [chat.name, chat.plugins.map((i) => [i.plugin, i.phase, i.breaker,
    ago(i.lastActivity)])];
  render($("plugins"), model, () => fillInstances(chat));
}

function fillInstances(chat) {
  if (!chat.plugins.length) {
    fill($("plugins"), h("p", { class: "empty" }, "The chat's project enables no plugin."));
    return;
  }
  const rows = chat.plugins.map((i) => {
    const phase = i.phase.toLowerCase();
    const breaker = i.breaker === "Closed" ? "closed" : i.breaker === "Open" ? "open" : "half-open";
    return h("tr", { dataset: { plugin: i.plugin } },
      h("th", { scope: "row" }, i.plugin),
      h("td", {}, h("span", { class: `pill phase-${phase}` }, i.phase)),
      h("td", {}, h("span", { class: `pill breaker-${breaker}` }, i.breaker)),
      h("td", { class: "muted" }, ago(i.lastActivity) || "never"),
      h("td", {},
        h("button", {
          type: "button",
          class: "stop",
          disabled: i.phase === "Stopped",
          dataset: { focusKey: `stop:${i.plugin}` },
          "aria-label": `Stop ${i.plugin} in ${chat.name}`,
          onclick: (event) => stop(chat.name, i.plugin, event.currentTarget),
        }, "Stop")));
  });
  fill($("plugins"), h("table", { class: "instances" },
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Plugin"), h("th", { scope: "col" }, "Phase"),
      h("th", { scope: "col" }, "Breaker"), h("th", { scope: "col" }, "Last activity"),
      h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")))),
    h("tbody", {}, rows)));
}

async function stop(chat, plugin, button) {
  button.disabled = true;
  try {
    await state.api.post(state.api.plugin(chat, plugin, "/stop"));
    status(`Stopped ${plugin} in ${chat}`);
  } catch (e) {
    status(`Stop ${plugin}: ${e.message}`, true);
    button.disabled = false;
  }
}

// ---- composer switches ----------------------------------------------------------------------

async function loadSwitches(chat) {
  const mark = state.switchBook.mark();
  const lists = await Promise.all(chat.plugins.map(async ({ plugin }) => {
    try {
      const { switches } = await state.api.get(state.api.plugin(chat.name, plugin, "/switches"));
      return switches.map((s) => ({ ...s, plugin }));
    } catch {
      return [];
    }
  }));
  if (state.chat !== chat.name) return;
  state.switchPills.clear();
  const pills = lists.flat().map((s) => switchPill(chat.name, s, mark));
  fill($("switches"), pills.length ? pills : h("p", { class: "empty" }, "No switches."));
}

/** A switch's pill, as the book says to show `listed` (read at `mark`). */
function switchPill(chat, listed, mark) {
  const key = switchKey(chat, listed.plugin, listed.id);
  const book = state.switchBook;
  const s = book.shown(key, listed, mark);
  const button = h("button", {
    type: "button",
    class: "switch",
    dataset: { plugin: s.plugin, switch: s.id },
  }, h("span", { class: "dot", "aria-hidden": "true" }), `${s.label}`);
  const show = (now) => {
    button.setAttribute("aria-pressed", String(now.on));
    button.title = now.title ?? "";
    button.classList.toggle("error", Boolean(now.error));
    button.classList.toggle("busy", Boolean(now.busy));
    button.disabled = book.pending(key);
  };
  const pill = { s, show, button };
  state.switchPills.set(key, pill);
  show(s);
  button.addEventListener("click", async () => {
    const before = { ...pill.s, busy: false };
    const on = button.getAttribute("aria-pressed") !== "true";
    book.clicked(key, on);
    show({ ...pill.s, on, busy: true });
    let settled;
    try {
      const now = await state.api.post(
        state.api.plugin(chat, s.plugin, `/switches/${encodeURIComponent(s.id)}`), { on });
      settled = { ...before, ...now, busy: Boolean(now.busy), error: Boolean(now.error) };
    } catch (e) {
      settled = { ...before, error: true, title: e.message };
    }
    book.settled(key, settled);
    // The list may have been read again meanwhile: the pill on the page now shows it.
    const live = state.switchPills.get(key) ?? pill;
    live.s = { ...live.s, ...settled };
    live.show(live.s);
  });
  return button;
}

// ---- panes ----------------------------------------------------------------------------------

/** Where this person's layout of `chat` is kept. */
function layoutStore(chat) {
  return layoutKey(state.api.namespace, userOf(state.api.token), chat);
}

/** Keeps the panes open now, in their order, as the person's layout of the chat. */
function saveLayout() {
  if (!state.chat) return;
  const keys = [...$("panes").querySelectorAll("section.pane[data-key]")].map((s) => s.dataset.key);
  writeLayout(localStorage, layoutStore(state.chat), keys);
}

async function loadPanes(chat) {
  const found = await Promise.all(chat.plugins.map(async ({ plugin }) => {
    try {
      const { panels, events } = await state.api.get(state.api.plugin(chat.name, plugin, "/panels"));
      state.events.set(plugin, Array.isArray(events) ? events : []);
      return panels.map((p) => ({ ...p, plugin }));
    } catch (e) {
      return [{ plugin, error: e }];
    }
  }));
  if (state.chat !== chat.name) return;
  const panels = [];
  for (const p of found.flat()) {
    if (!p.error) panels.push(p);
    else if (p.error.status === 409) state.gone.set(p.plugin, p.error.message);
  }
  state.panels = panels;
  const byPanel = new Map(panels.map((p) => [`${p.plugin}/${p.id}`, p]));
  const wanted = initialLayout(readLayout(localStorage, layoutStore(chat.name)), panels);
  for (const key of wanted) {
    const at = panelOf(key);
    const panel = at && byPanel.get(`${at.plugin}/${at.panel}`);
    const pane = state.panes.get(key);
    if (!panel) {
      // Kept in the layout, but its plugin no longer runs here: the pane says so.
      if (at && !pane) addGonePane(at, key);
      continue;
    }
    if (pane?.frame) pane.note.hidden = true; // Its plugin runs here (again).
    if (!pane) {
      addPane(chat, panel, key);
    } else if (!pane.frame) {
      closePane(key, { keep: true });
      addPane(chat, panel, key);
    } else if (due(pane.expires) && panel.expires !== pane.expires) {
      // The page reloads from a fresh link; its state is kept (state.get/set).
      pane.expires = panel.expires;
      pane.frame.src = panel.url;
    }
  }
  // A pane already open whose plugin the chat no longer runs says so.
  for (const [key, pane] of state.panes) {
    const at = panelOf(key);
    if (at && byPanel.has(`${at.plugin}/${at.panel}`)) continue;
    const why = state.gone.get(at?.plugin) ?? `plugin ${at?.plugin} no longer runs in this chat`;
    state.gone.set(at?.plugin, why);
    pane.note.textContent = why;
    pane.note.hidden = false;
  }
  renderPaneMenu();
  showEmptyPanes();
}

function showEmptyPanes() {
  const empty = $("panes").querySelector(":scope > p.empty");
  if (state.panes.size) {
    empty?.remove();
  } else if (!empty) {
    $("panes").append(h("p", { class: "empty" }, state.panels?.length
      ? "No pane open: add one from the menu."
      : "No plugin of this chat has a panel."));
  }
}

/** The add-pane menu: the panels of the plugins the project enables, a singleton shown once. */
function renderPaneMenu() {
  const open = [...state.panes.keys()];
  const entries = menu(state.panels ?? [], open);
  const model = [state.chat, entries];
  render($("add-pane-list"), model, () => fill($("add-pane-list"), entries.length
    ? entries.map((e) => h("li", {},
      h("button", {
        type: "button",
        class: "add-pane-item",
        disabled: e.disabled,
        title: e.why ?? `Add a pane of ${e.label}`,
        dataset: { plugin: e.plugin, panel: e.panel, focusKey: `add:${e.plugin}/${e.panel}` },
        onclick: () => addFromMenu(e.plugin, e.panel),
      }, h("span", {}, e.label), " ", h("span", { class: "muted" }, e.plugin),
      e.why ? h("span", { class: "muted" }, ` (${e.why})`) : null)))
    : h("li", { class: "empty" }, "No plugin of this chat has a panel.")));
  $("add-pane").querySelector("summary").setAttribute("aria-label", `Add pane (${entries.filter((e) => !e.disabled).length} available)`);
}

/** Adds a pane of `plugin`'s `panel` as the menu does; answers its key, or throws why not. */
function openPanel(plugin, panelId) {
  const chat = current();
  const panel = (state.panels ?? []).find((p) => p.plugin === plugin && p.id === panelId);
  if (!chat || !panel) throw new Error(`panel ${panelId} of plugin ${plugin} is not offered in this chat`);
  const added = add(panel, [...state.panes.keys()]);
  if (added.refused) throw new Error(added.refused);
  addPane(chat, panel, added.key);
  saveLayout();
  renderPaneMenu();
  return added.key;
}

function addFromMenu(plugin, panel) {
  try {
    const key = openPanel(plugin, panel);
    $("add-pane").open = false;
    state.panes.get(key)?.frame?.focus();
  } catch (e) {
    status(e.message, true);
  }
}

function closePane(key, { keep = false } = {}) {
  const pane = state.panes.get(key);
  if (!pane) return;
  closeAgentView(pane);
  pane.bridge?.close();
  pane.section.remove();
  state.panes.delete(key);
  if (keep) return;
  saveLayout();
  renderPaneMenu();
  showEmptyPanes();
}

function paneSection(key, title, plugin, ...body) {
  const close = h("button", {
    type: "button",
    class: "pane-close",
    "aria-label": `Close the ${title} pane`,
    dataset: { focusKey: `close:${key}` },
    onclick: () => closePane(key),
  }, "Close");
  return h("section", { class: "pane", "aria-label": `${title} (${plugin})`, dataset: { key } },
    h("header", { class: "pane-head" },
      h("h4", {}, title), h("span", { class: "muted" }, plugin), close),
    ...body);
}

/** A pane kept in the layout whose plugin no longer runs in the chat: it says so. */
function addGonePane(at, key) {
  const why = state.gone.get(at.plugin) ?? `plugin ${at.plugin} is no longer enabled in this chat`;
  const note = h("p", { class: "note", role: "status" }, why);
  const section = paneSection(key, at.panel, at.plugin, note);
  $("panes").append(section);
  state.panes.set(key, { section, frame: null, bridge: null, note, expires: null });
}

function addPane(chat, panel, key) {
  const context = {
    namespace: state.api.namespace,
    chat: chat.name,
    kind: chat.kind,
    plugin: panel.plugin,
    panel: panel.id,
  };
  if (chat.parent) context.parent = chat.parent;
  const frame = h("iframe", {
    class: "pane-frame",
    title: `${panel.label}: a panel of plugin ${panel.plugin}`,
    sandbox: "allow-scripts",
    referrerpolicy: "no-referrer",
    dataset: { plugin: panel.plugin, panel: panel.id },
  });
  const note = h("p", { class: "note", role: "status", hidden: true });
  const section = paneSection(key, panel.label, panel.plugin, note, frame);
  const bridge = bridgeFrame(frame, frameHandlers({
    api: state.api,
    context,
    state: paneState(sessionStorage, context),
    theme: () => theme(state.scheme),
    resize: null,
    gone: () => state.gone.get(panel.plugin) ?? null,
  }));
  frame.src = panel.url;
  $("panes").append(section);
  state.panes.set(key, { section, frame, bridge, note, expires: panel.expires });
  showEmptyPanes();
  if (state.runs.length) renderAgentLabels();
}

// ---- the card drawer ------------------------------------------------------------------------

async function loadDrawer() {
  const chat = state.chat;
  if (!chat) return;
  let drawer;
  try {
    drawer = await state.api.get(state.api.chat(chat, "/cards"));
  } catch (e) {
    fill($("cards"), h("p", { class: "error" }, `The drawer: ${e.message}`));
    return;
  }
  if (state.chat !== chat) return;
  const unread = $("unread");
  unread.hidden = drawer.unread === 0;
  unread.textContent = String(drawer.unread);
  unread.setAttribute("aria-label", `${drawer.unread} unread`);
  $("read-all").disabled = drawer.unread === 0;
  const seen = new Set();
  let previous = null;
  for (const card of drawer.cards) {
    seen.add(card.id);
    let entry = state.cards.get(card.id);
    if (!entry || entry.shows !== (card.url ? "page" : "note")) {
      entry?.bridge?.close();
      entry?.article.remove();
      entry = cardEntry(card);
      state.cards.set(card.id, entry);
    }
    updateCard(entry, card);
    if (entry.frame && due(entry.expires) && card.expires !== entry.expires) {
      entry.expires = card.expires;
      entry.frame.src = card.url;
    }
    // Newest first, in the drawer's order, moving only what moved (a frame moved reloads).
    const want = previous ? previous.nextSibling : $("cards").firstChild;
    if (want !== entry.article) $("cards").insertBefore(entry.article, want);
    previous = entry.article;
  }
  for (const [id, entry] of state.cards) {
    if (seen.has(id)) continue;
    entry.bridge?.close();
    entry.article.remove();
    state.cards.delete(id);
  }
  if (!drawer.cards.length) fill($("cards"), h("p", { class: "empty" }, "No cards yet."));
  else $("cards").querySelector(":scope > .empty")?.remove();
}

function cardEntry(card) {
  const title = h("h3", { class: "card-title" }, card.title);
  const meta = h("p", { class: "meta" });
  const mark = h("button", {
    type: "button",
    class: "mark-read",
    onclick: () => markRead([card.id]),
  }, "Mark read");
  const article = h("article", { class: "card", dataset: { card: card.id, plugin: card.plugin } },
    h("header", { class: "card-head" }, title, mark), meta);
  const entry = {
    article, meta, mark, shows: card.url ? "page" : "note", frame: null, bridge: null,
    expires: card.expires,
  };
  if (card.url) {
    const frame = h("iframe", {
      class: "card-frame",
      title: `${card.title}: a card of plugin ${card.plugin}`,
      sandbox: "allow-scripts",
      referrerpolicy: "no-referrer",
      dataset: { card: card.id },
    });
    frame.style.height = `${card.height ?? CARD_HEIGHT}px`;
    const context = {
      namespace: state.api.namespace,
      chat: state.chat,
      kind: current()?.kind ?? "channel",
      plugin: card.plugin,
      card: card.card,
      entry: card.id,
      data: card.data ?? null,
    };
    if (current()?.parent) context.parent = current().parent;
    entry.bridge = bridgeFrame(frame, frameHandlers({
      api: state.api,
      context,
      state: memoryState(),
      theme: () => theme(state.scheme),
      resize: (height) => { frame.style.height = `${height}px`; },
      gone: () => state.gone.get(card.plugin) ?? null,
    }));
    frame.src = card.url;
    entry.frame = frame;
    article.append(frame);
  } else {
    article.append(h("p", { class: "note", dataset: { reason: card.reason } }, card.note));
  }
  return entry;
}

function updateCard(entry, card) {
  entry.article.classList.toggle("unread", card.unread);
  entry.mark.hidden = !card.unread;
  entry.mark.setAttribute("aria-label", `Mark ${card.title} read`);
  entry.meta.textContent = `${card.plugin} · ${ago(card.created)}${card.unread ? " · unread" : ""}`;
}

// ---- notifications --------------------------------------------------------------------------

/** The chat's notifications under the cards: text with a level, each marked read apart. */
async function loadNotifications() {
  const chat = state.chat;
  if (!chat) return;
  let listed;
  try {
    listed = await state.api.get(state.api.chat(chat, "/notifications"));
  } catch (e) {
    fill($("notifications"), h("li", { class: "error" }, `Notifications: ${e.message}`));
    return;
  }
  if (state.chat !== chat) return;
  const unread = $("notifications-unread");
  unread.hidden = listed.unread === 0;
  unread.textContent = String(listed.unread);
  unread.setAttribute("aria-label", `${listed.unread} unread`);
  $("notifications-read-all").disabled = listed.unread === 0;
  const items = listed.notifications.map((n) => h("li", {
    class: `notification level-${n.level} from-${n.from}${n.unread ? " unread" : ""}`,
    dataset: { notification: n.id, plugin: n.plugin, from: n.from },
  },
  h("header", { class: "card-head" },
    h("h3", { class: "notification-title" }, n.title),
    n.unread
      ? h("button", {
        type: "button",
        class: "mark-read",
        "aria-label": `Mark ${n.title} read`,
        onclick: () => markNotificationsRead([n.id]),
      }, "Mark read")
      : null),
  n.body ? h("p", { class: "notification-body" }, n.body) : null,
  h("p", { class: "meta" },
    `${n.from === "host" ? `the host, about ${n.plugin}` : n.plugin} · ${n.level} · ${ago(n.created)}${n.unread ? " · unread" : ""}`)));
  if (!items.length) fill($("notifications"), h("li", { class: "empty" }, "No notifications."));
  else fill($("notifications"), ...items);
}

async function markNotificationsRead(ids) {
  const chat = state.chat;
  try {
    await state.api.post(state.api.chat(chat, "/notifications/read"), ids ? { ids } : { all: true });
  } catch (e) {
    status(`Marking read: ${e.message}`, true);
  }
  await Promise.all([loadNotifications(), loadChats().catch(() => {})]);
}

async function markRead(ids) {
  const chat = state.chat;
  try {
    const body = ids ? { ids } : { all: true };
    await state.api.post(state.api.chat(chat, "/cards/read"), body);
  } catch (e) {
    status(`Marking read: ${e.message}`, true);
  }
  await Promise.all([loadDrawer(), loadChats().catch(() => {})]);
}

// ---- approvals ------------------------------------------------------------------------------

/** Lists the namespace's approvals; a token that may not is told so in the drawer. */
async function loadApprovals() {
  if (!state.api) return;
  try {
    const { approvals } = await state.api.get(state.api.ns("/approvals"));
    state.approvals = Array.isArray(approvals) ? approvals : [];
    state.approvalsRefused = null;
  } catch (e) {
    state.approvals = [];
    state.approvalsRefused = e instanceof HostError && e.status === 403
      ? "This token may not see the approvals here (list toolcallapprovals)."
      : `The approvals: ${e.message}`;
  }
  renderChatList();
  renderApprovals();
}

/** Takes in one approval as the stream or a decision answered it. */
function approvalSeen(view) {
  if (!view || typeof view.name !== "string") return;
  const i = state.approvals.findIndex((a) => a.name === view.name);
  if (i >= 0) state.approvals[i] = view;
  else state.approvals.push(view);
  renderChatList();
  renderApprovals();
}

/** Follows the namespace's approvals as they are asked and decided. */
function followApprovals() {
  state.followApprovals?.abort();
  if (state.approvalsRefused) return;
  const control = new AbortController();
  state.followApprovals = control;
  const again = () => {
    if (control.signal.aborted) return;
    setTimeout(() => state.followApprovals === control && followApprovals(), 2000);
  };
  state.api.follow(state.api.ns("/approvals/watch"), {
    signal: control.signal,
    onEvent: ({ event, data }) => {
      if (event !== "approval") return;
      try { approvalSeen(JSON.parse(data)); } catch { /* not JSON: the next list has it */ }
    },
  }).then(again, again);
}

/** The chosen chat's approvals: a card for each waiting call, a line for each decided. */
function renderApprovals() {
  const chat = state.chat;
  if (!chat) return;
  const { pending, decided } = forChat(state.approvals, chat);
  const count = $("approvals-count");
  count.hidden = pending.length === 0;
  count.textContent = String(pending.length);
  count.setAttribute("aria-label", `${pending.length} waiting`);
  const list = $("approvals");
  const waiting = new Set(pending.map((a) => a.name));
  for (const [name, card] of state.approvalCards) {
    if (waiting.has(name)) continue;
    card.article.remove();
    state.approvalCards.delete(name);
  }
  let previous = null;
  for (const a of pending) {
    let card = state.approvalCards.get(a.name);
    if (!card) {
      card = approvalCard(chat, a);
      state.approvalCards.set(a.name, card);
    }
    const want = previous ? previous.nextSibling : list.firstChild;
    if (want !== card.article) list.insertBefore(card.article, want);
    previous = card.article;
  }
  list.querySelector(":scope > .empty")?.remove();
  if (!pending.length) {
    list.append(h("p", { class: "empty" }, state.approvalsRefused ?? "No tool call waits."));
  }
  render($("decided"), decided.map((a) => [a.name, a.decision, a.decidedBy, a.reason]), () =>
    fill($("decided"), decided.map((a) => h("li", {
      class: `decided decision-${a.decision.toLowerCase()}`,
      dataset: { approval: a.name, decision: a.decision },
    },
    h("span", { class: "decided-what" }, `${a.tool} · ${a.plugin}`),
    h("span", { class: "decided-how" }, decisionText(a)),
    h("span", { class: "muted" }, ago(a.decidedAt ?? a.requestedAt))))));
  tickApprovals();
}

/** A waiting call's card: what would run, with what, until when, and the three answers. */
function approvalCard(chat, a) {
  const left = h("span", { class: "left", dataset: { deadline: a.deadline } });
  const reason = h("input", {
    class: "reason",
    type: "text",
    maxlength: "500",
    placeholder: "Reason (optional)",
    "aria-label": `Reason for deciding ${a.tool}`,
    dataset: { focusKey: `reason:${a.name}` },
  });
  const buttons = ANSWERS.map(({ answer, label, kind }) => h("button", {
    type: "button",
    class: `decide ${kind}`,
    dataset: { answer, focusKey: `decide:${a.name}:${answer}` },
    "aria-label": `${label}: ${a.tool} of ${a.plugin}`,
    onclick: () => decide(chat, a, answer, card),
  }, label));
  const article = h("article", { class: "approval", dataset: { approval: a.name, plugin: a.plugin } },
    h("header", { class: "approval-head" },
      h("h3", { class: "approval-tool" }, a.tool),
      left),
    h("p", { class: "meta" },
      `Agent ${a.agent} of ${a.plugin} asks to call it, in run ${a.run} (risk profile ${a.profile}), with:`),
    h("pre", { class: "input", "aria-label": "The input it would run with" }, inputText(a.input)),
    reason,
    h("div", { class: "answers" }, buttons));
  const card = { article, reason, left, buttons };
  return card;
}

async function decide(chat, a, answer, card) {
  for (const b of card.buttons) b.disabled = true;
  const reason = card.reason.value.trim();
  const body = reason ? { answer, reason } : { answer };
  try {
    const decided = await state.api.post(
      state.api.chat(chat, `/approvals/${encodeURIComponent(a.name)}`), body);
    status(`${a.tool}: ${decisionText(decided)}`);
    approvalSeen(decided);
  } catch (e) {
    status(`${a.tool}: ${refusalText(e)}`, true);
    if (e instanceof HostError && ["approval_decided", "approval_expired"].includes(e.code)) {
      await loadApprovals();
    } else {
      for (const b of card.buttons) b.disabled = false;
    }
  }
}

/** Counts the waiting calls' time down, each second. */
function tickApprovals() {
  const now = Date.now();
  for (const card of state.approvalCards.values()) {
    const text = timeLeft(card.left.dataset.deadline, now);
    if (card.left.textContent !== text) card.left.textContent = text;
    card.article.classList.toggle("overdue", text === "past its deadline");
  }
}

// ---- the agent view -------------------------------------------------------------------------

/** The agent label on each pane whose plugin started a run in the chat. */
function renderAgentLabels() {
  const started = pluginsWithRuns(state.runs);
  for (const [key, pane] of state.panes) {
    const plugin = panelOf(key)?.plugin;
    const has = started.has(plugin) && !!pane.frame;
    if (has && !pane.agentButton) {
      pane.agentButton = h("button", {
        type: "button",
        class: "agent-label",
        "aria-pressed": "false",
        title: `The chat of ${plugin}'s agent run, beside its panel`,
        onclick: () => toggleAgentView(key),
      }, "Agent");
      pane.section.querySelector(".pane-close").before(pane.agentButton);
    } else if (!has && pane.agentButton) {
      closeAgentView(pane);
      pane.agentButton.remove();
      pane.agentButton = null;
    }
    if (pane.agent) refreshAgentView(key);
  }
}

function toggleAgentView(key) {
  const pane = state.panes.get(key);
  if (!pane) return;
  if (pane.agent) return closeAgentView(pane);
  const chatView = h("section", { class: "agent-chat", "aria-label": "The agent run's chat, read-only", tabindex: "-1" });
  pane.section.classList.add("with-agent");
  pane.frame.after(chatView);
  pane.agent = { view: chatView, run: null, shown: "", timer: 0 };
  pane.agentButton.setAttribute("aria-pressed", "true");
  refreshAgentView(key);
}

function closeAgentView(pane) {
  if (!pane.agent) return;
  clearTimeout(pane.agent.timer);
  pane.agent.view.remove();
  pane.agent = null;
  pane.section.classList.remove("with-agent");
  pane.agentButton?.setAttribute("aria-pressed", "false");
}

/** Reads the pane's run again and draws its chat; again in 2 s while it runs. */
async function refreshAgentView(key) {
  const pane = state.panes.get(key);
  const agent = pane?.agent;
  if (!agent) return;
  clearTimeout(agent.timer);
  const listed = runFor(state.runs, panelOf(key)?.plugin);
  if (!listed) return;
  let run;
  try {
    run = await state.api.get(state.api.chat(state.chat, `/runs/${encodeURIComponent(listed.id)}`));
  } catch (e) {
    fill(agent.view, h("p", { class: "error" }, `Run ${listed.id}: ${e.message}`));
    return;
  }
  if (pane.agent !== agent) return;
  const { live, items } = entries(run);
  const model = JSON.stringify([run.id, run.phase, items]);
  if (model !== agent.shown) {
    agent.shown = model;
    fill(agent.view,
      h("header", { class: "agent-head" },
        h("span", { class: `run-mark${live ? " live" : ""}`, "aria-hidden": "true" }),
        h("strong", {}, `${run.agent ?? "agent"}`), " ",
        h("span", { class: "muted" }, `${run.id} · ${run.phase}`)),
      h("ol", { class: "agent-entries" }, items.map(agentEntry)));
    agent.view.dataset.phase = run.phase;
  }
  if (live) agent.timer = setTimeout(() => refreshAgentView(key), 2000);
}

function agentEntry(item) {
  switch (item.kind) {
    case "user": return h("li", { class: "entry user" }, h("span", { class: "who" }, "Prompt"), h("pre", {}, item.text));
    case "tool":
      return h("li", { class: `entry tool${item.error ? " error" : ""}` },
        h("span", { class: "who" }, `Tool ${item.tool}`),
        h("pre", { class: "input" }, item.input),
        h("pre", { class: "answer" }, item.answer));
    case "agent": return h("li", { class: "entry agent" }, h("span", { class: "who" }, "Answer"), h("p", {}, item.text));
    case "failed": return h("li", { class: "entry failed" }, h("span", { class: "who" }, "Failed"), h("p", {}, item.text));
    default: return h("li", { class: "entry note" }, item.text);
  }
}

// ---- the Tasks panel ------------------------------------------------------------------------

/** `interval 5m` → {type, schedule}. */
function scheduleOf(text) {
  const [type, ...rest] = String(text ?? "").split(" ");
  return ["cron", "interval"].includes(type) ? { type, schedule: rest.join(" ") } : {};
}

/** Lists the chat's tasks, and what the project's trust says of the edits waiting. */
async function loadTasks() {
  const chat = current();
  if (!chat) return;
  let listed;
  try {
    listed = await state.api.get(state.api.chat(chat.name, "/tasks"));
  } catch (e) {
    fill($("tasks"), h("p", { class: "error" }, e instanceof HostError && e.status === 403
      ? `This token may not see the chat's tasks (get channels/tasks): ${e.message}`
      : `The tasks: ${e.message}`));
    return;
  }
  if (state.chat !== chat.name) return;
  state.tasks = listed.tasks;
  renderTasks(chat);
  await setPendingOptions(chat);
  await loadTaskOptions(chat);
}

/** The options a New task asked for, set on its task once the task is there (it is made once
 * the owner trusts the config and the controller applies the entry). */
async function setPendingOptions(chat) {
  for (const t of state.tasks ?? []) {
    const key = `${chat.name}/${t.plugin}/${t.action}`;
    const options = state.pendingOptions.get(key);
    if (!options) continue;
    state.pendingOptions.delete(key);
    await writeOptions(chat, t, options, false);
  }
}

/** Sets `t`'s own options through the host API (RBAC: update channels/tasks). */
async function writeOptions(chat, t, options, reload = true) {
  const path = state.api.chat(chat.name, `/tasks/${encodeURIComponent(t.name)}/options`);
  try {
    await state.api.put(path, options);
    status(`Set the options of ${t.plugin} · ${t.action}.`);
  } catch (e) {
    status(`${t.plugin} · ${t.action}: ${e instanceof HostError && e.status === 403
      ? `this token may not set a task's options (update channels/tasks): ${e.message}`
      : e.message}`, true);
    return false;
  }
  if (reload) {
    delete $("tasks").dataset.model;
    await loadTasks();
  }
  return true;
}

/** The New task menu: each action of a plugin the project enables; and the trust's note. */
async function loadTaskOptions(chat) {
  let view;
  try {
    view = await state.api.get(state.api.ns(`/projects/${encodeURIComponent(chat.project)}/plugins`));
  } catch {
    $("new-task").hidden = true; // Not allowed to read the project's config: no New task.
    return;
  }
  state.tasksProject = view.project;
  $("new-task").hidden = false;
  const options = view.plugins
    .filter((p) => p.enabled && Array.isArray(p.actions))
    .flatMap((p) => p.actions.map((a) => [`${p.plugin}/${a.id}`, `${p.name ?? p.plugin} · ${a.id}`]));
  const model = [chat.name, options];
  render($("new-task-action"), model, () => fill($("new-task-action"),
    options.map(([v, text]) => h("option", { value: v }, text))));
  const note = $("tasks-trust");
  const pending = view.project.trust !== "Trusted";
  note.hidden = !pending;
  render(note, [chat.name, pending], () => fill(note, pending
    ? ["A change to the project's tasks counts once its owner trusts the config. ",
      h("button", { type: "button", id: "tasks-trust-now", onclick: () => trustTasks(chat) }, "Trust it")]
    : []));
}

async function trustTasks(chat) {
  try {
    await state.api.post(state.api.ns(`/projects/${encodeURIComponent(chat.project)}/trust`),
      { hash: state.tasksProject.hash });
    status(`Trusted project ${chat.project}'s config.`);
  } catch (e) {
    status(`Trusting: ${e.message}`, true);
  }
  await loadTasks();
}

function renderTasks(chat) {
  const tasks = state.tasks ?? [];
  render($("tasks"), [chat.name, tasks], () => fill($("tasks"), tasks.length
    ? h("table", { class: "task-table" },
      h("thead", {}, h("tr", {}, ["Task", "Schedule", "Next run", "Last run", "", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, tasks.map((t) => taskRow(chat, t))))
    : h("p", { class: "empty" }, "No task in this chat.")));
}

function taskRow(chat, t) {
  const outcome = t.lastOutcome ? h("span", { class: `pill run-${t.lastOutcome}` }, t.lastOutcome) : null;
  const words = optionsSummary(t.options);
  return h("tr", { dataset: { task: t.name, plugin: t.plugin, action: t.action, enabled: String(t.enabled) } },
    h("td", {}, h("strong", {}, t.action), " ", h("span", { class: "muted" }, t.plugin),
      t.source ? h("span", { class: "muted" }, ` · ${t.source} entry`) : null,
      words.length ? h("span", { class: "task-option-words" }, words.map((w) => h("span", { class: "pill" }, w))) : null,
      t.optionsProblem ? h("span", { class: "error" }, ` options not read: ${t.optionsProblem}`) : null),
    h("td", {}, h("code", {}, t.schedule ?? t.cron), t.enabled ? null : h("span", { class: "pill" }, "off")),
    h("td", {}, t.nextRun ? `${t.nextRun.slice(0, 16).replace("T", " ")} UTC` : "—"),
    h("td", {}, t.lastRun ? ago(t.lastRun) : "never", " ", outcome),
    h("td", {},
      h("button", { type: "button", class: "task-toggle", onclick: () => editTask(chat, t, { enabled: !t.enabled }) },
        t.enabled ? "Turn off" : "Turn on"),
      h("button", { type: "button", class: "task-edit", onclick: (e) => editSchedule(chat, t, e.target) }, "Edit"),
      h("button", { type: "button", class: "task-options", "aria-expanded": "false",
        onclick: (e) => editOptions(chat, t, e.target) }, "Options")),
    h("td", {}, t.deletable
      ? h("button", { type: "button", class: "task-delete", onclick: () => writeTask(chat, t.plugin, t.action, null) }, "Delete")
      : h("span", { class: "muted", title: "A global entry makes it: it comes back when the entry changes" }, "global")));
}

/** Writes the project's entry of `t`'s action: its schedule as it is, with `change`. */
function editTask(chat, t, change) {
  const entry = { enabled: t.enabled, ...scheduleOf(t.schedule), ...change };
  return writeTask(chat, t.plugin, t.action, entry);
}

/** Edits a task's schedule in place: its type and expression, saved as the project's entry. */
function editSchedule(chat, t, button) {
  const row = button.closest("tr");
  const cell = row.children[1];
  const current = scheduleOf(t.schedule);
  const id = `task-${t.name}`;
  const type = h("select", { id: `${id}-type`, "aria-label": `${t.action}: type` },
    ["cron", "interval"].map((k) => h("option", { value: k, selected: k === (current.type ?? "cron") }, k)));
  const expr = h("input", {
    id: `${id}-schedule`, value: current.schedule ?? t.cron, "aria-label": `${t.action}: schedule`, size: 14,
  });
  const save = h("button", {
    type: "button", class: "task-save",
    onclick: () => editTask(chat, t, { type: type.value, schedule: expr.value.trim() }),
  }, "Save");
  fill(cell, type, " ", expr, " ", save);
  delete $("tasks").dataset.model; // The next listing draws the row again.
  expr.focus();
}

/** The task's own options in a row under it: Worktree, Update before run, Auto-delete. */
function editOptions(chat, t, button) {
  const row = button.closest("tr");
  if (row.nextElementSibling?.classList.contains("task-options-row")) {
    row.nextElementSibling.remove();
    button.setAttribute("aria-expanded", "false");
    return;
  }
  const id = `task-${t.name}-options`;
  const o = t.options ?? {};
  const worktree = h("input", { type: "checkbox", id: `${id}-worktree`, checked: Boolean(o.worktree) });
  const update = h("input", { type: "checkbox", id: `${id}-update`, checked: Boolean(o.updateBeforeRun) });
  const autoDelete = h("input", {
    id: `${id}-auto-delete`, inputmode: "numeric", size: 8,
    value: o.autoDeleteSeconds === undefined ? "" : String(o.autoDeleteSeconds), placeholder: "off",
  });
  const problem = h("p", { class: "error", role: "alert", hidden: true });
  // A refusal stands until the person changes something.
  for (const field of [worktree, update, autoDelete]) {
    field.addEventListener("input", () => { problem.hidden = true; });
  }
  const close = () => {
    formRow.remove();
    button.setAttribute("aria-expanded", "false");
    button.focus();
  };
  const save = h("button", {
    type: "button", class: "task-options-save",
    onclick: async () => {
      const made = optionsFrom({ worktree: worktree.checked, updateBeforeRun: update.checked, autoDelete: autoDelete.value });
      if (made.refused) {
        fill(problem, made.refused);
        problem.hidden = false;
        return;
      }
      if (await writeOptions(chat, t, made.options)) close();
    },
  }, "Save options");
  const formRow = h("tr", { class: "task-options-row" }, h("td", { colspan: 6 },
    h("div", { class: "task-options-form", role: "group", "aria-label": `${t.action}: options` },
      h("label", { for: worktree.id }, worktree, " Worktree"),
      h("span", { class: "muted" }, "runs the action in a worktree thread of its own, made on the first run"),
      h("label", { for: update.id }, update, " Update before run"),
      h("span", { class: "muted" }, "rebases that worktree onto the origin branch first"),
      h("span", {}, h("label", { for: autoDelete.id }, "Auto-delete after "), autoDelete, " seconds"),
      h("span", { class: "muted" }, "deletes the thread that long after the action started"),
      h("span", { class: "actions" }, save, " ", h("button", { type: "button", onclick: close }, "Cancel")),
      problem)));
  row.after(formRow);
  button.setAttribute("aria-expanded", "true");
  worktree.focus();
}

async function writeTask(chat, plugin, action, entry) {
  const path = state.api.ns(`/projects/${encodeURIComponent(chat.project)}/plugins/${encodeURIComponent(plugin)}`);
  try {
    await state.api.patch(path, { schedules: { [action]: entry } });
    status(entry === null
      ? `Removed the project's entry of ${plugin} · ${action}.`
      : `Wrote the project's entry of ${plugin} · ${action}.`);
  } catch (e) {
    status(`${plugin} · ${action}: ${e.message}`, true);
  }
  await loadTasks();
}

async function newTask(event) {
  event.preventDefault();
  const chat = current();
  const chosen = $("new-task-action").value;
  if (!chat || !chosen) return;
  const [plugin, action] = chosen.split("/");
  const made = optionsFrom({
    worktree: $("new-task-worktree").checked,
    updateBeforeRun: $("new-task-update").checked,
    autoDelete: $("new-task-auto-delete").value,
  });
  if (made.refused) {
    status(`New task: ${made.refused}`, true);
    return;
  }
  const entry = { enabled: true };
  if ($("new-task-type").value) entry.type = $("new-task-type").value;
  if ($("new-task-schedule").value.trim()) entry.schedule = $("new-task-schedule").value.trim();
  if (made.options.worktree) state.pendingOptions.set(`${chat.name}/${plugin}/${action}`, made.options);
  $("new-task").open = false;
  await writeTask(chat, plugin, action, entry);
}

// ---- Settings → Plugins ---------------------------------------------------------------------

function settingsStatus(text, error = false) {
  const el = $("settings-status");
  el.textContent = text;
  el.classList.toggle("error", error);
}

async function openSettings() {
  const chat = current();
  if (!chat) return;
  if (!$("settings").open) {
    state.settingsTouched.clear();
    state.settings = null; // drawn afresh: nothing typed and left unsaved comes back
    settingsStatus("");
    $("settings").showModal();
  }
  await loadSettings(chat.project);
}

async function loadSettings(project) {
  const read = ++state.settingsRead;
  try {
    const view = await state.api.get(state.api.ns(`/projects/${encodeURIComponent(project)}/plugins`));
    if (read !== state.settingsRead) return;
    // Drawn again only when it moved: what the person points at stays put otherwise.
    if (state.settings && JSON.stringify(state.settings) === JSON.stringify(view)) return;
    state.settings = view;
    renderSettings();
  } catch (e) {
    if (read !== state.settingsRead) return;
    state.settings = null;
    fill($("settings-body"));
    settingsStatus(e instanceof HostError && e.status === 403
      ? `This token may not read project ${project}'s config (get projects): ${e.message}`
      : `Project ${project}: ${e.message}`, true);
  }
}

function setScope(scope) {
  state.settingsScope = scope;
  state.settingsTouched.clear();
  $("settings-project").setAttribute("aria-pressed", String(scope === "project"));
  $("settings-global").setAttribute("aria-pressed", String(scope === "global"));
  renderSettings();
}

const TRUST_SAYS = {
  Trusted: "The owner trusts this config.",
  LastApproved: "Changed since the owner trusted it: enabled and schedules wait for the trust; settings count now.",
  NeverTrusted: "Never trusted: enabled and schedules count once the owner trusts it; settings count now.",
  ApprovedHashMismatch: "The trusted version does not match its hash: trust it again.",
  TrustOfAnotherProject: "The trust on record was made for another project of this name: trust it again.",
};

/** Each plugin form and the plugin's view it shows (as JSON), to tell when it moved. */
const shownViews = new WeakMap();

function renderSettings() {
  const view = state.settings;
  if (!view) return;
  const scope = state.settingsScope;
  const project = view.project;
  const head = scope === "project"
    ? h("div", { class: "settings-trust", dataset: { trust: project.trust } },
      h("p", {}, `Project ${project.name}: ${TRUST_SAYS[project.trust] ?? project.trust}`),
      project.trust === "Trusted" ? null : h("button", {
        type: "button",
        id: "settings-trust",
        onclick: () => trustProject(project),
      }, "Trust this config"))
    : h("p", { class: "muted" }, "The global config: every project's, under its own entries.");
  // A form the person is editing is kept as they left it (listing again on plugins.changed
  // must not undo their typing); it says so when its plugin's config moved underneath.
  const editing = new Map([...$("settings-body").querySelectorAll("fieldset.plugin-settings")]
    .filter((f) => f.dataset.scope === scope && state.settingsTouched.has(f.dataset.plugin))
    .map((f) => [f.dataset.plugin, f]));
  const plugins = view.plugins.map((p) => {
    const kept = editing.get(p.plugin);
    if (!kept) return pluginForm(p, scope);
    if (shownViews.get(kept) !== JSON.stringify(p) && !kept.querySelector(".stale")) {
      kept.querySelector("legend").after(h("p", { class: "note stale" },
        "Changed elsewhere while you edit: Save writes only what you changed here; Close and open Settings again to see it as it is now."));
    }
    return kept;
  });
  state.settingsTouched = new Set([...editing.keys()].filter((id) => view.plugins.some((p) => p.plugin === id)));
  fill($("settings-body"), head, plugins.length ? plugins : h("p", { class: "empty" }, "No plugin is installed."));
}

/**
 * The person is done with `plugin`'s form (saved, upgraded, removed): it is drawn afresh from
 * the view as last listed, then listed again. A listing that came while the write was under
 * way kept the form as they had it (it was being edited then), and listing again finds the
 * same view and draws nothing: without this the form would stay as it was before the write.
 */
async function settled(plugin) {
  state.settingsTouched.delete(plugin);
  renderSettings();
  await loadSettings(state.settings.project.name);
}

async function trustProject(project) {
  try {
    await state.api.post(state.api.ns(`/projects/${encodeURIComponent(project.name)}/trust`), { hash: project.hash });
    settingsStatus(`Trusted project ${project.name}'s config.`);
  } catch (e) {
    settingsStatus(`Trusting: ${e.message}`, true);
  }
  await loadSettings(project.name);
}

function select(id, label, value, options) {
  return [h("label", { for: id }, label),
    h("select", { id }, options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)))];
}

/** One plugin's entry at `scope` as a form. */
function pluginForm(p, scope) {
  const id = (what) => `set-${p.plugin}-${what}`.replace(/[^a-zA-Z0-9_-]/g, "_");
  const title = `${p.name ?? p.plugin} (${p.plugin}${p.version ? ` ${p.version}` : ""})`;
  if (p.notAdmitted) {
    return h("fieldset", { class: "plugin-settings", dataset: { plugin: p.plugin } },
      h("legend", {}, title), h("p", { class: "note" }, `Not admitted: ${p.notAdmitted}`));
  }
  const entry = (scope === "global" ? p.global : p.project) ?? {};
  const secret = new Set(p.secretSettings ?? []);
  const fields = Object.entries(p.settings ?? {}).map(([n, schema]) => fieldOf(n, schema, secret.has(n)));
  const runs = p.enabled ? "runs in this project" : "does not run in this project";
  const waits = p.awaitingTrust ? " · a change waits for the owner's trust" : "";
  const enabledValue = entry.enabled === true ? "true" : entry.enabled === false ? "false" : "";
  const below = scope === "global" ? "the host's default" : "the global config";
  const settingRows = fields.map((f) => {
    const control = id(`setting-${f.name}`);
    const now = p.effective?.[f.name];
    const hint = f.kind === "secret"
      ? "a Secret's name and key; never its value"
      : `now ${now === undefined ? "unset" : JSON.stringify(now)}${f.description ? ` · ${f.description}` : ""}`;
    let input;
    if (f.kind === "secret") {
      const ref = entry.secretSettings?.[f.name]?.secretKeyRef ?? {};
      input = h("span", { class: "secret-ref", dataset: { setting: f.name } },
        h("input", { id: control, placeholder: "Secret name", value: ref.name ?? "", "aria-label": `${f.title}: Secret name` }),
        h("input", { id: `${control}-key`, placeholder: "key", value: ref.key ?? "", "aria-label": `${f.title}: key` }));
    } else if (f.options) {
      const value = shown(f, entry.settings?.[f.name]);
      input = h("select", { id: control, dataset: { setting: f.name } },
        h("option", { value: "", selected: value === "" }, "(unset)"),
        f.options.map((o) => h("option", { value: o, selected: o === value }, o)));
    } else if (f.kind === "json") {
      input = h("textarea", { id: control, rows: 3, dataset: { setting: f.name }, spellcheck: "false" },
        shown(f, entry.settings?.[f.name]));
    } else {
      input = h("input", {
        id: control,
        type: f.kind === "string" ? "text" : "number",
        min: f.min, max: f.max,
        step: f.kind === "integer" ? 1 : "any",
        value: shown(f, entry.settings?.[f.name]),
        placeholder: "(unset)",
        dataset: { setting: f.name },
      });
    }
    return h("div", { class: "setting-row" },
      h("label", { for: control }, f.title), input, h("span", { class: "muted" }, hint));
  });
  const scheduleRows = (p.actions ?? []).map((a) => {
    const row = entry.schedules?.[a.id];
    const base = id(`schedule-${a.id}`);
    const def = a.default_schedule ? `${a.default_schedule.type} ${a.default_schedule.schedule}` : "no default";
    return h("div", { class: "schedule-row", dataset: { action: a.id } },
      h("label", {}, h("input", { type: "checkbox", id: `${base}-on`, checked: !!row }), ` ${a.id}`),
      ...select(`${base}-enabled`, "turned", row?.enabled === true ? "true" : row?.enabled === false ? "false" : "",
        [["", "on (default)"], ["true", "on"], ["false", "off"]]),
      ...select(`${base}-type`, "type", row?.type ?? "", [["", "default"], ["cron", "cron"], ["interval", "interval"]]),
      h("input", { id: `${base}-schedule`, value: row?.schedule ?? "", placeholder: def, "aria-label": `${a.id}: schedule` }));
  });
  const form = h("fieldset", { class: "plugin-settings", dataset: { plugin: p.plugin, scope } },
    h("legend", {}, title),
    h("p", { class: "muted" }, `${runs}${waits}`),
    h("div", { class: "setting-row" },
      ...select(id("enabled"), "Enabled", enabledValue, [["", `as ${below} says`], ["true", "on"], ["false", "off"]])),
    settingRows.length ? h("div", { class: "settings-fields" }, settingRows) : null,
    (p.leftOut ?? []).length ? h("ul", { class: "note" }, p.leftOut.map((l) => h("li", {}, l))) : null,
    scheduleRows.length ? h("div", { class: "schedules" }, h("h4", {}, "Scheduled actions"), scheduleRows) : null,
    h("button", { type: "button", class: "settings-save", onclick: () => saveEntry(p, scope, fields, entry, id) }, "Save"),
    scope === "global" ? upgradeSection(p, id) : null);
  shownViews.set(form, JSON.stringify(p));
  return form;
}

/** Upgrade (with its capability review) and Remove: the plugin's own, so under Global. */
function upgradeSection(p, id) {
  const image = id("upgrade-image");
  return h("div", { class: "plugin-upgrade" },
    h("div", { class: "setting-row" },
      h("label", { for: image }, "Upgrade to"),
      h("input", { id: image, placeholder: "an image (empty: the installed tag, looked up again)" })),
    h("div", { class: "upgrade-actions" },
      h("button", { type: "button", class: "upgrade-review-open", onclick: () => reviewUpgrade(p, id) }, "Review upgrade"),
      h("button", { type: "button", class: "plugin-remove", onclick: () => askRemove(p, id) }, "Remove…")),
    h("div", { class: "upgrade-review", id: id("upgrade-review"), "aria-live": "polite" }));
}

async function reviewUpgrade(p, id) {
  const out = $(id("upgrade-review"));
  const image = $(id("upgrade-image")).value.trim();
  state.settingsTouched.add(p.plugin);
  fill(out, h("p", { class: "muted" }, "Pulling the image and reviewing it…"));
  let review;
  try {
    review = await state.api.post(state.api.host(`/global/plugins/${encodeURIComponent(p.plugin)}/review`), image ? { image } : {});
  } catch (e) {
    fill(out, h("p", { class: "error" }, `Review: ${e.message}`));
    return;
  }
  const box = (row) => `${id("upgrade-cap")}-${row.capability.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  const dropped = review.candidate?.dropped ?? [];
  fill(out,
    h("p", { class: "upgrade-summary" }, reviewSummary(review)),
    h("ul", { class: "capability-review" }, reviewRows(review).map((row) => h("li", { dataset: { before: row.before } },
      row.choice === "ask"
        ? h("label", { for: box(row) },
          h("input", { type: "checkbox", id: box(row), dataset: { capability: row.capability } }), ` Approve ${row.capability}`)
        : h("span", {}, row.capability),
      h("span", { class: "muted" }, ` ${row.says} · ${row.allows}`)))),
    dropped.length ? h("p", { class: "muted" }, `No longer asked for, its approval dropped: ${dropped.join(", ")}`) : null,
    review.refused ? h("p", { class: "error" }, review.refused) : null,
    review.waits ? h("p", { class: "muted" }, `Admission would wait: ${review.waits}`) : null,
    h("button", {
      type: "button",
      class: "upgrade-apply",
      disabled: Boolean(review.refused),
      onclick: () => applyUpgrade(p, review, out),
    }, `Upgrade to ${review.candidate?.version ?? "this image"}`));
}

async function applyUpgrade(p, review, out) {
  const chosen = new Set([...out.querySelectorAll("input[type=checkbox][data-capability]")]
    .filter((b) => b.checked).map((b) => b.dataset.capability));
  let done;
  try {
    done = await state.api.put(state.api.host(`/global/plugins/${encodeURIComponent(p.plugin)}`), upgradeBody(review, chosen));
  } catch (e) {
    return settingsStatus(`Upgrading ${p.plugin}: ${e.message}`, true);
  }
  settingsStatus(`Upgraded ${p.plugin} to ${done.version ?? done.image}; the controller admits it next.`);
  await settled(p.plugin);
}

function askRemove(p, id) {
  const out = $(id("upgrade-review"));
  state.settingsTouched.add(p.plugin);
  fill(out,
    h("p", {}, `Remove ${p.name ?? p.plugin} from every project? Its instances and tasks go; its volumes are kept unless the Plugin purges them.`),
    h("div", { class: "upgrade-actions" },
      h("button", { type: "button", class: "plugin-remove-confirm danger", onclick: () => removePlugin(p) }, `Remove ${p.plugin}`),
      h("button", { type: "button", onclick: () => { state.settingsTouched.delete(p.plugin); fill(out); } }, "Cancel")));
}

async function removePlugin(p) {
  try {
    await state.api.delete(state.api.host(`/global/plugins/${encodeURIComponent(p.plugin)}`));
  } catch (e) {
    return settingsStatus(`Removing ${p.plugin}: ${e.message}`, true);
  }
  settingsStatus(`Removed ${p.plugin}.`);
  await settled(p.plugin);
}

async function saveEntry(p, scope, fields, entry, id) {
  const value = (el) => $(el)?.value ?? "";
  const typed = { enabled: value(id("enabled")), settings: {}, secrets: {}, schedules: {} };
  for (const f of fields) {
    const control = id(`setting-${f.name}`);
    if (f.kind === "secret") typed.secrets[f.name] = { name: value(control), key: value(`${control}-key`) };
    else typed.settings[f.name] = value(control);
  }
  for (const a of p.actions ?? []) {
    const base = id(`schedule-${a.id}`);
    const on = $(`${base}-on`)?.checked ?? false;
    typed.schedules[a.id] = {
      remove: !on, keep: on,
      enabled: value(`${base}-enabled`), type: value(`${base}-type`), schedule: value(`${base}-schedule`),
    };
  }
  const made = editOf(entry, fields, typed);
  if (made.errors) return settingsStatus(made.errors.join("; "), true);
  if (!Object.keys(made.edit).length) return settingsStatus(`${p.plugin}: nothing changed.`);
  const path = scope === "global"
    ? state.api.host(`/global/plugins/${encodeURIComponent(p.plugin)}`)
    : state.api.ns(`/projects/${encodeURIComponent(state.settings.project.name)}/plugins/${encodeURIComponent(p.plugin)}`);
  try {
    await state.api.patch(path, made.edit);
  } catch (e) {
    // Refused: the form keeps what the person typed, to mend or leave.
    return settingsStatus(`${p.plugin}: ${e.message}`, true);
  }
  settingsStatus(scope === "global"
    ? `Saved ${p.plugin}'s global entry.`
    : `Saved ${p.plugin}'s entry in project ${state.settings.project.name}.`);
  await settled(p.plugin);
}

// ---- UI commands ----------------------------------------------------------------------------

/** Follows the UI commands the plugins send to `chat`, while it is the chosen one. */
function followCommands(chat) {
  if (state.followCommands?.chat === chat) return;
  state.followCommands?.abort();
  const control = new AbortController();
  control.chat = chat;
  state.followCommands = control;
  const again = (e) => {
    if (control.signal.aborted || state.followCommands !== control) return;
    if (e instanceof HostError && e.status === 403) {
      state.commandsRefused = `This token may not follow the chat's UI commands (watch channels/uicommands): ${e.message}`;
      return;
    }
    setTimeout(() => {
      if (state.followCommands !== control) return;
      state.followCommands = null;
      followCommands(chat);
    }, 2000);
  };
  state.api.follow(state.api.chat(chat, "/ui/commands"), {
    signal: control.signal,
    onOpen: () => { state.commandsRefused = null; },
    onEvent: ({ event, data }) => {
      if (event !== "command") return;
      let command;
      try { command = JSON.parse(data); } catch { return; }
      if (command?.chat !== chat || typeof command.id !== "string") return;
      carryOut(chat, command);
    },
  }).then(again, again);
}

/** Carries out a command's steps here and answers for each. */
async function carryOut(chat, command) {
  const answer = await runSteps(command.steps, commandDoers(chat, command));
  state.commands.push({ id: command.id, plugin: command.plugin, steps: command.steps, answer });
  if (state.commands.length > 50) state.commands.shift();
  try {
    await state.api.post(state.api.chat(chat, `/ui/commands/${encodeURIComponent(command.id)}`), answer);
    status(summary(command, answer));
  } catch (e) {
    // Another tab of this chat answered first (404), or the command lapsed.
    status(`A UI command of ${command.plugin}: ${e.message}`, !(e instanceof HostError && e.status === 404));
  }
}

/** What this console does for each step of `command`, in `chat`. */
function commandDoers(chat, command) {
  return {
    select_chat: async () => {
      if (state.chat !== chat) await selectChat(chat);
      $("chat").focus();
    },
    open_panel: async ({ panel }) => {
      // The pane open already (a singleton's one), else a new one, as the menu adds it.
      const open = [...state.panes.entries()].find(([k]) => {
        const at = panelOf(k);
        return at?.plugin === command.plugin && at.panel === panel;
      });
      const key = open ? open[0] : openPanel(command.plugin, panel);
      const pane = state.panes.get(key);
      if (!pane.frame || !pane.note.hidden) throw new Error(pane.note.textContent);
      pane.section.scrollIntoView({ block: "nearest" });
      pane.section.classList.remove("called");
      void pane.section.offsetWidth; // Restarts the highlight.
      pane.section.classList.add("called");
      pane.frame.focus();
    },
    open_drawer: async () => {
      $("drawer").scrollIntoView({ block: "nearest" });
      $("cards-title").setAttribute("tabindex", "-1");
      $("cards-title").focus();
    },
    notify: async ({ message, level }) => toast(command.plugin, String(message), level),
  };
}

/** A passing message of `plugin`, read out by screen readers, gone after a while. */
function toast(plugin, message, level = "info") {
  const known = ["info", "success", "warning", "error"].includes(level) ? level : "info";
  const item = h("li", { class: `toast ${known}`, role: known === "error" ? "alert" : "status" },
    h("span", { class: "toast-plugin" }, plugin), " ", h("span", { class: "toast-message" }, message),
    h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss", onclick: () => item.remove() }, "×"));
  $("toasts").append(item);
  setTimeout(() => item.remove(), 10000);
}

// ---- agent runs -----------------------------------------------------------------------------

async function loadRuns() {
  const chat = state.chat;
  if (!chat) return;
  let runs;
  try {
    ({ runs } = await state.api.get(state.api.chat(chat, "/runs")));
  } catch (e) {
    fill($("runs"), h("li", { class: "error" }, `The runs: ${e.message}`));
    return;
  }
  if (state.chat !== chat) return;
  state.runs = runs;
  renderAgentLabels();
  const items = runs.map((r) => h("li", { class: "run", dataset: { run: r.id } },
    h("span", { class: `pill run-${r.phase.toLowerCase()}` }, r.phase),
    h("span", { class: "run-what" }, `${r.plugin} · ${r.agent}`),
    h("span", { class: "muted" }, ago(r.ended ?? r.started ?? r.created)),
    r.result || r.reason
      ? h("p", { class: "run-result" }, r.reason ? `${r.reason}: ${r.result ?? ""}` : r.result)
      : null));
  fill($("runs"), items.length ? items : h("li", { class: "empty" }, "No runs in this chat."));
}

// ---- plugins.changed ------------------------------------------------------------------------

function stopFollowing() {
  state.follow?.abort();
  state.follow = null;
  state.followCommands?.abort();
  state.followCommands = null;
  state.followApprovals?.abort();
  state.followApprovals = null;
  clearInterval(state.poll);
  clearInterval(state.tick);
}

function follow() {
  state.follow?.abort();
  const control = new AbortController();
  state.follow = control;
  const again = () => {
    if (!control.signal.aborted) setTimeout(() => state.follow === control && follow(), 2000);
  };
  state.api.follow(state.api.ns("/plugins/changes"), {
    signal: control.signal,
    onOpen: () => {
      document.body.dataset.following = "true";
      status("Listening for plugins.changed");
    },
    onEvent: ({ event, data }) => {
      if (event !== "plugins.changed") return;
      let change;
      try { change = JSON.parse(data); } catch { return; }
      changed(change);
    },
  }).then(again, again);
}

/** Lists again on plugins.changed: the sidebar always, the chat's parts when they moved. */
async function changed(change) {
  state.changes.push(change);
  const where = change.chat ? ` in ${change.chat}` : "";
  const what = change.plugin ?? (change.project ? `project ${change.project}` : "global config");
  status(`plugins.changed: ${what} ${change.change}${where}`);
  await loadChats().catch(() => {});
  const chat = current();
  if (!chat) return;
  const plugins = ["installed", "upgraded", "removed"].includes(change.change);
  const here = change.chat === chat.name && ["enabled", "disabled"].includes(change.change);
  if (change.change === "removed") state.gone.set(change.plugin, `plugin ${change.plugin} was removed`);
  if (change.change === "disabled" && here) {
    state.gone.set(change.plugin, `the chat's project no longer enables plugin ${change.plugin}`);
  }
  if (change.change === "enabled" && here) state.gone.delete(change.plugin);
  if (plugins || here) {
    await Promise.all([loadSwitches(chat), loadPanes(chat), loadDrawer(), loadNotifications()]);
  }
  const config = change.change === "config" || change.change === "trusted";
  const ours = config && (change.scope === "global" || change.project === chat.project);
  if (ours) await settingsChanged(chat);
  // Settings → Plugins lists the plugins again, as the reference's does.
  const listed = state.settings?.project?.name;
  const settingsMoved = plugins || (config && (change.scope === "global" || change.project === listed));
  if ($("settings").open && listed && settingsMoved) await loadSettings(listed);
}

/**
 * A config write or trust of the chat's project (or the global config): each plugin of the
 * chat whose frames get settings.changed is sent its settings as they are now, as the bridge's
 * `event` notification (docs/bridge.md), to its panes and cards. Like the container's, it goes
 * whether or not the settings moved; a frame compares them with what it acted on.
 */
async function settingsChanged(chat) {
  await Promise.all(chat.plugins.map(async ({ plugin }) => {
    if (!state.events.get(plugin)?.includes("settings.changed")) return;
    let settings;
    try {
      ({ settings } = await state.api.get(state.api.plugin(chat.name, plugin, "/settings")));
    } catch {
      return; // Not enabled here any more, or not allowed: nothing to tell.
    }
    if (state.chat !== chat.name) return;
    const event = { type: "settings.changed", data: { settings } };
    for (const [key, pane] of state.panes) {
      if (panelOf(key)?.plugin === plugin) pane.bridge?.notify("event", event);
    }
    for (const card of state.cards.values()) {
      if (card.article.dataset.plugin === plugin) card.bridge?.notify("event", event);
    }
  }));
}

async function poll() {
  if (!state.api || document.hidden) return;
  const chat = current();
  if (chat && [...state.panes.values()].some((p) => due(p.expires))) loadPanes(chat);
  const chats = loadChats().catch((e) => e);
  await Promise.all([loadDrawer(), loadNotifications(), loadRuns(), loadApprovals(),
    document.querySelector("#tasks .task-save, #tasks .task-options-row") ? null : loadTasks()]);
  const failed = await chats;
  if (failed instanceof HostError && failed.status === 401) {
    signOut(`The cluster no longer accepts the token (expired or revoked): ${failed.message}`);
  } else if (failed instanceof Error) {
    status(`Listing the chats: ${failed.message}`, true);
  }
}

// ---- the page -------------------------------------------------------------------------------

function status(text, error = false) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", error);
}

function setScheme(scheme) {
  state.scheme = scheme;
  applyTheme(document.documentElement, scheme);
  sessionStorage.setItem(SCHEME_KEY, scheme);
  const dark = scheme === "dark";
  $("theme").setAttribute("aria-pressed", String(dark));
  const now = theme(scheme);
  for (const pane of state.panes.values()) pane.bridge?.notify("theme.changed", now);
  for (const card of state.cards.values()) card.bridge?.notify("theme.changed", now);
}

function wire() {
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    const namespace = $("signin-namespace").value.trim();
    if (!token || !namespace) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(NAMESPACE_KEY, namespace);
    $("token").value = "";
    start();
  });
  $("namespace-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const namespace = $("namespace").value.trim();
    if (!namespace || namespace === state.api?.namespace) return;
    sessionStorage.setItem(NAMESPACE_KEY, namespace);
    sessionStorage.removeItem(CHAT_KEY);
    stopFollowing();
    clearChat();
    state.chat = null;
    start();
  });
  $("sign-out").addEventListener("click", () => signOut());
  $("theme").addEventListener("click", () => setScheme(state.scheme === "dark" ? "light" : "dark"));
  $("read-all").addEventListener("click", () => markRead(null));
  $("notifications-read-all").addEventListener("click", () => markNotificationsRead(null));
  $("settings-open").addEventListener("click", () => openSettings());
  $("new-task-form").addEventListener("submit", (event) => newTask(event));
  $("settings-close").addEventListener("click", () => $("settings").close());
  for (const kind of ["input", "change"]) {
    $("settings-body").addEventListener(kind, (event) => {
      const form = event.target.closest?.("fieldset.plugin-settings");
      if (form) state.settingsTouched.add(form.dataset.plugin);
    });
  }
  $("settings-project").addEventListener("click", () => setScope("project"));
  $("settings-global").addEventListener("click", () => setScope("global"));
}

wire();
const dark = globalThis.matchMedia?.("(prefers-color-scheme: dark)").matches;
setScheme(sessionStorage.getItem(SCHEME_KEY) ?? (dark ? "dark" : "light"));
fromFragment();
start();
