// The theme: the reference's ten CSS variables, light and dark. The console sets them on its
// own root and answers them to every frame (theme.get, theme.changed; docs/bridge.md).

export const THEMES = Object.freeze({
  light: Object.freeze({
    "--bg": "#f6f7f9",
    "--surface": "#ffffff",
    "--fg": "#1c2128",
    "--muted": "#5b6472",
    "--border": "#d5dae1",
    "--accent": "#2f5fd0",
    "--success": "#1f7a4d",
    "--danger": "#c0392b",
    "--font": "system-ui, -apple-system, \"Segoe UI\", sans-serif",
    "--mono": "ui-monospace, \"SFMono-Regular\", Menlo, monospace",
  }),
  dark: Object.freeze({
    "--bg": "#15181d",
    "--surface": "#1e232a",
    "--fg": "#e6e9ee",
    "--muted": "#9aa4b2",
    "--border": "#353c46",
    "--accent": "#7aa2ff",
    "--success": "#4cc38a",
    "--danger": "#ff6b5e",
    "--font": "system-ui, -apple-system, \"Segoe UI\", sans-serif",
    "--mono": "ui-monospace, \"SFMono-Regular\", Menlo, monospace",
  }),
});

/** The theme as the bridge answers it: {vars, scheme}. */
export function theme(scheme) {
  const name = scheme === "dark" ? "dark" : "light";
  return { vars: { ...THEMES[name] }, scheme: name };
}

/** Sets the theme's variables on an element (the console's root). */
export function applyTheme(root, scheme) {
  const { vars, scheme: name } = theme(scheme);
  for (const [key, value] of Object.entries(vars)) root.style.setProperty(key, value);
  root.dataset.scheme = name;
  root.style.colorScheme = name;
}
