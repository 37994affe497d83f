// Settings → Plugins as a form: a field per schema, an emptied field unsets, only what changed
// is sent, and no schema or typing makes it throw.

import { test } from "node:test";
import assert from "node:assert/strict";

import { editOf, fieldOf, read, shown } from "../assets/settings_form.js";

const schemas = {
  verbose: { type: "boolean", default: false },
  count: { type: "integer", minimum: 1, maximum: 10 },
  mode: { type: "string", enum: ["fast", "slow"] },
  name: { type: "string" },
  tags: { type: "array", items: { type: "string" } },
  token: { type: "string", secret: true },
};
const fields = Object.entries(schemas).map(([n, s]) => fieldOf(n, s, s.secret === true));

test("each schema asks for its field, and a value shows as it is typed", () => {
  assert.deepEqual(fields.map((f) => f.kind), ["boolean", "integer", "enum", "string", "json", "secret"]);
  assert.equal(fields[1].min, 1);
  assert.deepEqual(fields[2].options, ['"fast"', '"slow"']);
  assert.equal(shown(fields[0], false), "false");
  assert.equal(shown(fields[2], "slow"), '"slow"');
  assert.equal(shown(fields[4], undefined), "");
  assert.deepEqual(read(fields[1], "4"), { value: 4 });
  assert.match(read(fields[1], "4.5").error, /^count: a whole number/);
  assert.deepEqual(read(fields[0], ""), { unset: true });
  assert.deepEqual(read(fields[4], '["a"]'), { value: ["a"] });
});

test("only what changed is in the edit; an emptied field unsets", () => {
  const entry = { enabled: true, settings: { verbose: true, count: 3 }, schedules: { tick: { enabled: false } } };
  const typed = {
    enabled: "true",
    settings: { verbose: "true", count: "", mode: '"fast"', name: "", tags: "" },
    secrets: { token: { name: "creds", key: "token" } },
    schedules: { tick: { enabled: "false" }, daily: { enabled: "", type: "", schedule: "" } },
  };
  assert.deepEqual(editOf(entry, fields, typed), { edit: {
    settings: { count: null, mode: "fast" },
    secretSettings: { token: { secretKeyRef: { name: "creds", key: "token" } } },
  } });
  const removed = editOf(entry, fields, { ...typed, enabled: "", schedules: { tick: { remove: true } } });
  assert.equal(removed.edit.enabled, null);
  assert.deepEqual(removed.edit.schedules, { tick: null });
  const half = editOf(null, fields, { settings: {}, secrets: { token: { name: "creds" } } });
  assert.deepEqual(half, { errors: ["token: a Secret's name and key, both"] });
  assert.deepEqual(editOf(null, fields, { enabled: "", settings: {} }), { edit: {} });
});

test("no schema nor typing makes it throw", () => {
  const junk = [null, 7, "x", [], { type: 9 }, { enum: "x" }, { enum: [] }, { type: "number", minimum: "1" },
    { title: {}, description: [] }, { enum: Array.from({ length: 500 }, (_, i) => i) }];
  const texts = ["", " ", "0", "-1e309", "NaN", "true", "{", "[1,2]", "\u0000", "x".repeat(70000)];
  for (const schema of junk) {
    const f = fieldOf("s", schema);
    for (const t of texts) {
      const r = read(f, t);
      assert.ok("value" in r || r.unset || typeof r.error === "string", JSON.stringify(schema));
      const e = editOf({ settings: { s: 1 } }, [f], { settings: { s: t } });
      assert.ok(e.edit || e.errors);
    }
  }
});
