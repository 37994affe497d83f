// index.d.ts declares every value index.js exports, and nothing it does not (the full type check
// against a usage file is hack/bridge-typecheck.sh, which needs TypeScript from npm).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import * as mod from "../index.js";

test("index.d.ts declares exactly the values index.js exports", async () => {
  const dts = await readFile(new URL("../index.d.ts", import.meta.url), "utf8");
  const declared = [...dts.matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(declared.sort(), Object.keys(mod).sort());
});

test("package.json points at the module and its types", async () => {
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.name, "loop-plugin-ui");
  assert.equal(pkg.type, "module");
  assert.equal(pkg.private, false);
  assert.equal(pkg.types, "./index.d.ts");
  assert.deepEqual(pkg.exports["."], { types: "./index.d.ts", default: "./index.js" });
});
