// Settings → Plugins as a form (the reference's app): a field for each setting from its schema
// in the manifest, what the person typed read back as a value (an emptied field unsets), and
// the edit the host API takes: only what changed, a `null` for what was emptied. Pure.

/** The field a setting's schema asks for. */
export function fieldOf(name, schema, secret = false) {
  const s = schema && typeof schema === "object" && !Array.isArray(schema) ? schema : {};
  const base = {
    name,
    title: typeof s.title === "string" ? s.title : name,
    description: typeof s.description === "string" ? s.description : "",
  };
  if (secret) return { ...base, kind: "secret" };
  if (Array.isArray(s.enum) && s.enum.length && s.enum.length <= 100) {
    return { ...base, kind: "enum", options: s.enum.map((v) => JSON.stringify(v)) };
  }
  switch (s.type) {
    case "boolean": return { ...base, kind: "boolean", options: ["true", "false"] };
    case "integer":
    case "number": {
      const f = { ...base, kind: s.type };
      if (typeof s.minimum === "number") f.min = s.minimum;
      if (typeof s.maximum === "number") f.max = s.maximum;
      return f;
    }
    case "string": return { ...base, kind: "string" };
    default: return { ...base, kind: "json" };
  }
}

/** What a field shows for `value` (undefined: unset). */
export function shown(field, value) {
  if (value === undefined || value === null) return "";
  switch (field.kind) {
    case "boolean": return value === true ? "true" : value === false ? "false" : "";
    case "enum": return JSON.stringify(value);
    case "string": return typeof value === "string" ? value : JSON.stringify(value);
    case "integer":
    case "number": return typeof value === "number" ? String(value) : JSON.stringify(value);
    default: return JSON.stringify(value, null, 2);
  }
}

/** The value typed into a field: `{unset: true}` for an emptied one, `{value}`, or `{error}`
 * naming the field. The host checks it against the schema again. */
export function read(field, text) {
  const t = typeof text === "string" ? text : "";
  if (t.trim() === "" && field.kind !== "string") return { unset: true };
  if (t === "" ) return { unset: true };
  const bad = (why) => ({ error: `${field.name}: ${why}` });
  switch (field.kind) {
    case "boolean":
      return t === "true" ? { value: true } : t === "false" ? { value: false } : bad("true or false");
    case "integer":
    case "number": {
      const n = Number(t);
      if (!Number.isFinite(n)) return bad("a number");
      if (field.kind === "integer" && !Number.isInteger(n)) return bad("a whole number");
      return { value: n };
    }
    case "string": return { value: t };
    default:
      if (t.length > 64 * 1024) return bad("at most 64 KiB of JSON");
      try { return { value: JSON.parse(t) }; } catch { return bad("not JSON"); }
  }
}

const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * The edit of `entry` (the level's current entry, or null) that the form's `typed` makes:
 * `{enabled: "" | "true" | "false", settings: {name: text}, secrets: {name: {name, key}},
 * schedules: {action: {enabled: "" | "true" | "false", type: "", schedule: "", remove}}}`
 * over `fields`. Answers `{edit}` (only what changed; empty when nothing did) or `{errors}`.
 */
export function editOf(entry, fields, typed) {
  const current = entry && typeof entry === "object" ? entry : {};
  const edit = {};
  const errors = [];
  const enabled = typed.enabled === "true" ? true : typed.enabled === "false" ? false : null;
  if (!same(enabled, current.enabled)) edit.enabled = enabled;
  for (const field of fields) {
    if (field.kind === "secret") {
      const ref = typed.secrets?.[field.name] ?? {};
      const name = (ref.name ?? "").trim();
      const key = (ref.key ?? "").trim();
      const was = current.secretSettings?.[field.name] ?? null;
      let now = null;
      if (name || key) {
        if (!name || !key) { errors.push(`${field.name}: a Secret's name and key, both`); continue; }
        now = { secretKeyRef: { name, key } };
      }
      if (!same(now, was)) (edit.secretSettings ??= {})[field.name] = now;
      continue;
    }
    const got = read(field, typed.settings?.[field.name] ?? "");
    if (got.error) { errors.push(got.error); continue; }
    const now = got.unset ? null : got.value;
    if (!same(now, current.settings?.[field.name])) (edit.settings ??= {})[field.name] = now;
  }
  for (const [action, row] of Object.entries(typed.schedules ?? {})) {
    const was = current.schedules?.[action] ?? null;
    let now = null;
    if (!row.remove) {
      now = {};
      if (row.enabled === "true") now.enabled = true;
      if (row.enabled === "false") now.enabled = false;
      if (row.type) now.type = row.type;
      if ((row.schedule ?? "").trim()) now.schedule = row.schedule.trim();
      // An entry the person never touched and that says nothing is no entry.
      if (!was && !Object.keys(now).length && !row.keep) now = null;
    }
    if (!same(now, was)) (edit.schedules ??= {})[action] = now;
  }
  return errors.length ? { errors } : { edit };
}
