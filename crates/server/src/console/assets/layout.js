// The panes of a chat as a person arranged them (the reference's "Panels": a plugin's panels
// in the add-pane menu after the built-in ones, a singleton shown at most once per layout): the
// add-pane menu, what may be added, and the layout kept in the browser per user and chat. Pure,
// but for the storage handed in.

/** The most panes one layout holds. */
export const MAX_PANES = 12;
/** The longest stored layout taken back, as JSON. */
const MAX_STORED = 16 * 1024;

/** A pane's key: the panel's `plugin/panel` for its first pane, `#n` after for more. */
export function paneKey(plugin, panel, n = 1) {
  return n <= 1 ? `${plugin}/${panel}` : `${plugin}/${panel}#${n}`;
}

/** The `{plugin, panel}` of a pane's key, or null for a key that is not one (a plugin is
 * named as Kubernetes names objects; a panel's id is the manifest's, any text). */
export function panelOf(key) {
  if (typeof key !== "string" || key.length > 400) return null;
  const slash = key.indexOf("/");
  const plugin = key.slice(0, slash);
  const panel = key.slice(slash + 1).replace(/#[0-9]{1,3}$/, "");
  if (slash < 0 || !/^[a-z0-9][a-z0-9.-]{0,252}$/.test(plugin) || plugin.includes("..") || !panel) return null;
  return { plugin, panel };
}

/** Who the token speaks for, as far as the browser can tell (a JWT's `sub`), for keeping each
 * person's layout apart; "" when it cannot tell. Never trusted for anything else. */
export function userOf(token) {
  const part = typeof token === "string" ? token.split(".")[1] : undefined;
  if (!part || part.length > 8192) return "";
  try {
    const json = atob(part.replaceAll("-", "+").replaceAll("_", "/").padEnd(Math.ceil(part.length / 4) * 4, "="));
    const sub = JSON.parse(json)?.sub;
    return typeof sub === "string" ? sub.slice(0, 256) : "";
  } catch {
    return "";
  }
}

/** Where the layout of `chat` for `user` is kept. */
export function layoutKey(namespace, user, chat) {
  return `loop-console:layout:${namespace}/${user}/${chat}`;
}

/** The stored layout (pane keys in order), or null when the person never arranged one. */
export function readLayout(storage, key) {
  const text = storage.getItem(key);
  if (text === null || text.length > MAX_STORED) return null;
  try {
    const keys = JSON.parse(text);
    if (!Array.isArray(keys)) return null;
    const seen = new Set();
    return keys.filter((k) => panelOf(k) && !seen.has(k) && seen.add(k)).slice(0, MAX_PANES);
  } catch {
    return null;
  }
}

export function writeLayout(storage, key, keys) {
  storage.setItem(key, JSON.stringify(keys.slice(0, MAX_PANES)));
}

/** The panes to show: the stored layout, or every panel once, in the menu's order. */
export function initialLayout(stored, panels) {
  if (stored) return stored;
  return panels.slice(0, MAX_PANES).map((p) => paneKey(p.plugin, p.id));
}

/** How many panes of `plugin/panel` `open` holds. */
function shown(open, plugin, panel) {
  return open.filter((k) => {
    const p = panelOf(k);
    return p && p.plugin === plugin && p.panel === panel;
  }).length;
}

/** Why `panel` cannot be added to a layout of `open` panes, or null. */
export function refusal(panel, open) {
  if (panel.singleton && shown(open, panel.plugin, panel.id) > 0) {
    return `${panel.label} is shown once per layout, and it is open`;
  }
  if (open.length >= MAX_PANES) return `a layout holds at most ${MAX_PANES} panes`;
  return null;
}

/** The key of the pane that adding `panel` to `open` makes, or `{refused}`. */
export function add(panel, open) {
  const why = refusal(panel, open);
  if (why) return { refused: why };
  let n = 1;
  while (open.includes(paneKey(panel.plugin, panel.id, n))) n++;
  return { key: paneKey(panel.plugin, panel.id, n) };
}

/** The add-pane menu: every panel of the plugins the project enables, in their order, each
 * with whether it can be added now and why not. */
export function menu(panels, open) {
  return panels.map((p) => {
    const why = refusal(p, open);
    return { plugin: p.plugin, panel: p.id, label: p.label, singleton: !!p.singleton, disabled: why !== null, why };
  });
}
