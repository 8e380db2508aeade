// Runs standard tools on localeflow's published contract, as an outside
// team would use them (docs/integrating.md "What the repository gives
// you"):
//
//   1. every JSON Schema of contract/schema compiles under ajv's strict
//      mode (draft 2020-12);
//   2. every document a valid vector carries validates against its
//      schema, and every output sample still validates with an unknown
//      member added (outputs are additive);
//   3. every OpenAPI document of contract/openapi validates, bundles
//      (external $refs inlined) to a document that validates too, and
//      whose body schemas compile and accept the vectors' bodies;
//   4. openapi-typescript generates types from each bundled document and
//      tsc type-checks the vectors' bodies against them.
//
// One line per check (PASS/FAIL), then "N passed, N failed"; exit 1 when
// one failed. Run by `make test-contract` (part of `make test`).
import { readFileSync, readdirSync, mkdirSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import Ajv2020 from "ajv/dist/2020.js";
import $RefParser from "@apidevtools/json-schema-ref-parser";
import { Validator } from "@seriousme/openapi-schema-validator";
import openapiTS, { astToString } from "openapi-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const schemaDir = join(root, "contract", "schema");
const openapiDir = join(root, "contract", "openapi");
const vectorDir = join(root, "contract", "testdata", "vectors");
const outDir = join(root, "build", "schemacheck");
mkdirSync(outDir, { recursive: true });

let passed = 0;
let failed = 0;
function result(ok, what, detail = "") {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "PASS" : "FAIL"}  ${what}${detail ? "  (" + detail + ")" : ""}`);
}
const readJSON = (p) => JSON.parse(readFileSync(p, "utf8"));
const errText = (errors) => (errors || []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ").slice(0, 300);

// 1. ajv strict.
const ajv = new Ajv2020({ strict: true, allErrors: true });
const schemaFiles = readdirSync(schemaDir).filter((f) => f.endsWith(".schema.json")).sort();
const validators = {};
for (const f of schemaFiles) {
  try {
    validators[f] = ajv.compile(readJSON(join(schemaDir, f)));
    result(true, `ajv strict compiles ${f}`);
  } catch (e) {
    result(false, `ajv strict compiles ${f}`, String(e.message).slice(0, 300));
  }
}

// 2. The vectors' documents.
const vectors = (name) => readJSON(join(vectorDir, name)).vectors;
const valid = (v) => v.valid === undefined || v.valid === true;
const payloadOf = (token) => Buffer.from(token.split(".")[1], "base64url").toString("utf8");
const samples = []; // [schema file, document text, where]
for (const v of vectors("event_signature.json")) {
  if (!valid(v) || !v.detail) continue;
  samples.push(["signed-event.schema.json", v.detail, `event_signature.json "${v.name}"`]);
  const payloadSchema = {
    "localeflow.change.dispatched": "change-dispatched.payload.schema.json",
    "localeflow.plan.accepted": "plan-accepted.payload.schema.json",
    "localeflow.job.completed": "job-completed.payload.schema.json",
  }[v.detail_type];
  if (payloadSchema) samples.push([payloadSchema, JSON.parse(v.detail).payload, `event_signature.json "${v.name}" payload`]);
}
for (const v of vectors("http_signature.json")) {
  if (v.op === "sign_response") samples.push(["cms-lifecycle-response.schema.json", v.body, `http_signature.json "${v.name}"`]);
}
for (const v of vectors("evidence_request_id.json")) {
  if (valid(v) && v.body) samples.push(["evidence-request.schema.json", v.body, `evidence_request_id.json "${v.name}"`]);
}
for (const v of vectors("receipts.json")) {
  if (valid(v)) samples.push(["receipt-payload.schema.json", payloadOf(v.receipt), `receipts.json "${v.name}"`]);
}
for (const v of vectors("approval_tokens.json")) {
  if (v.op === "verify_approval" && valid(v)) samples.push(["approval-payload.schema.json", payloadOf(v.token), `approval_tokens.json "${v.name}"`]);
}
for (const v of vectors("delivery_bundles.json")) {
  if (!valid(v)) continue;
  samples.push(["delivery-request.schema.json", v.body, `delivery_bundles.json "${v.name}"`]);
  const bundle = payloadOf(JSON.parse(v.body).bundle);
  samples.push(["delivery-bundle.schema.json", bundle, `delivery_bundles.json "${v.name}" bundle`]);
  for (const l of JSON.parse(bundle).locales) samples.push(["approval-payload.schema.json", payloadOf(l.approval), `delivery_bundles.json "${v.name}" approval`]);
}
const outputSchema = {
  "localeflow.change.terminal": "change-terminal.schema.json",
  "localeflow.release.approved": "release-approved.schema.json",
  "localeflow.delivery.ready": "delivery-event.schema.json",
  "localeflow.delivery.delivered": "delivery-event.schema.json",
  "localeflow.health.blocked": "health-blocked.schema.json",
};
const outputs = vectors("output_events.json");
for (const v of outputs) {
  const detail = typeof v.detail === "string" ? v.detail : JSON.stringify(v.detail);
  samples.push([outputSchema[v.detail_type], detail, `output_events.json "${v.name}"`]);
}
let sampleFailures = 0;
for (const [file, text, where] of samples) {
  const validate = validators[file];
  if (!validate || !validate(JSON.parse(text))) {
    sampleFailures++;
    result(false, `${where} validates against ${file}`, validate ? errText(validate.errors) : "schema did not compile");
  }
}
result(sampleFailures === 0 && samples.length >= 30, `${samples.length - sampleFailures} of ${samples.length} vector documents validate`);
for (const v of outputs) {
  const detail = typeof v.detail === "string" ? JSON.parse(v.detail) : structuredClone(v.detail);
  detail.a_member_added_later = { any: "value" };
  const validate = validators[outputSchema[v.detail_type]];
  result(!!validate && validate(detail), `output_events.json "${v.name}" with an unknown member validates (additive)`, validate ? errText(validate.errors) : "");
}

// 3. OpenAPI: validate, bundle, validate the bundle, compile its body
// schemas and validate the vectors' bodies with them.
const bodySamples = {
  "cms-lifecycle-response.schema.json": samples.filter((s) => s[0] === "cms-lifecycle-response.schema.json"),
  "delivery-request.schema.json": samples.filter((s) => s[0] === "delivery-request.schema.json"),
  "evidence-request.schema.json": samples.filter((s) => s[0] === "evidence-request.schema.json"),
};
const typeChecks = []; // [ts module, type expression, document text, where]
for (const f of readdirSync(openapiDir).filter((f) => f.endsWith(".json")).sort()) {
  const path = join(openapiDir, f);
  const raw = readJSON(path);
  // The document as published, its external $refs (the schema files)
  // given to the validator under the references it uses.
  const validator = new Validator();
  for (const ref of new Set(JSON.stringify(raw).match(/"\.\.\/schema\/[^"#]+"/g) || [])) {
    const rel = JSON.parse(ref);
    validator.addSpecRef(readJSON(join(openapiDir, rel)), rel);
  }
  const res = await validator.validate(raw);
  result(res.valid, `${f} is a valid OpenAPI ${raw.openapi} document`, res.valid ? "" : JSON.stringify(res.errors).slice(0, 300));
  let bundled;
  try {
    bundled = await $RefParser.bundle(path);
  } catch (e) {
    result(false, `${f} bundles`, String(e.message).slice(0, 300));
    continue;
  }
  const bundledRes = await new Validator().validate(structuredClone(bundled));
  result(bundledRes.valid, `${f} bundled (external $refs inlined) is a valid OpenAPI document`, bundledRes.valid ? "" : JSON.stringify(bundledRes.errors).slice(0, 300));
  writeFileSync(join(outDir, f.replace(".json", ".bundled.json")), JSON.stringify(bundled, null, 2));
  // The body schemas of the bundle, by the schema file they came from.
  const bodies = [];
  for (const [p, item] of Object.entries(bundled.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (typeof op !== "object" || !op.operationId) continue;
      const req = op.requestBody?.content?.["application/json"];
      if (req) bodies.push([op.operationId, "request", req.schema, `operations["${op.operationId}"]["requestBody"]["content"]["application/json"]`]);
      const ok = op.responses?.["200"]?.content?.["application/json"];
      if (ok) bodies.push([op.operationId, "200", ok.schema, `operations["${op.operationId}"]["responses"][200]["content"]["application/json"]`]);
    }
  }
  for (const [opId, where, schema, tsType] of bodies) {
    const file = schemaFileOf(schema, bundled);
    const docs = bodySamples[file] || [];
    let validate;
    try {
      const target = schema.$ref ? schema.$ref.replace(/^#\//, "").split("/").map((k) => k.replace(/~1/g, "/").replace(/~0/g, "~")).reduce((o, k) => o?.[k], bundled) : schema;
      // A fresh ajv per body: the bundle's schemas keep their $id.
      validate = new Ajv2020({ strict: true, allErrors: true }).compile(structuredClone(target));
    } catch (e) {
      result(false, `${f} ${opId} ${where} body schema compiles from the bundle`, String(e.message).slice(0, 300));
      continue;
    }
    const bad = docs.filter(([, text]) => !validate(JSON.parse(text)));
    if (docs.length > 0) {
      result(bad.length === 0, `${f} ${opId} ${where}: the bundle's schema accepts ${docs.length} vector bodies`, bad.length ? bad[0][2] + ": " + errText(validate.errors) : "");
      for (const [, text, w] of docs) typeChecks.push([f.replace(".json", ""), tsType, text, w]);
    }
  }
  // 4. openapi-typescript.
  try {
    const ast = await openapiTS(bundled);
    writeFileSync(join(outDir, f.replace(".json", ".ts")), astToString(ast));
    result(true, `openapi-typescript generates ${f.replace(".json", ".ts")}`);
  } catch (e) {
    result(false, `openapi-typescript generates types for ${f}`, String(e.message).slice(0, 300));
  }
}

// schemaFileOf names the contract/schema file a bundled body schema came
// from (by its $id).
function schemaFileOf(schema, bundled) {
  let s = schema;
  if (s.$ref) {
    s = s.$ref.replace(/^#\//, "").split("/").map((k) => k.replace(/~1/g, "/").replace(/~0/g, "~")).reduce((o, k) => o?.[k], bundled);
  }
  const id = s?.$id || "";
  for (const f of schemaFiles) {
    if (readJSON(join(schemaDir, f)).$id === id) return f;
  }
  return "";
}

// 5. Every guide section the published documents cite exists.
{
  const headings = {};
  for (const f of readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md"))) {
    headings["docs/" + f] = new Set(readFileSync(join(root, "docs", f), "utf8").split("\n")
      .filter((l) => l.startsWith("#")).map((l) => l.replace(/^#+\s*/, "").replace(/`/g, "").trim()));
  }
  const cited = [];
  for (const [dir, files] of [[openapiDir, readdirSync(openapiDir)], [schemaDir, schemaFiles]]) {
    for (const f of files.filter((f) => f.endsWith(".json"))) {
      const text = JSON.stringify(readJSON(join(dir, f)));
      for (const m of text.matchAll(/(docs\/[a-z-]+\.md)((?:\s*,?\s*(?:and\s+)?\\"[^\\]+\\")+)/g)) {
        for (const sec of m[2].matchAll(/\\"([^\\]+)\\"/g)) cited.push([f, m[1], sec[1]]);
      }
    }
  }
  const missing = cited.filter(([, doc, sec]) => !headings[doc]?.has(sec));
  result(missing.length === 0 && cited.length > 0, `${cited.length - missing.length} of ${cited.length} guide sections cited by contract/ exist`,
    missing.map(([f, doc, sec]) => `${f} cites ${doc} "${sec}"`).join("; "));
}

// tsc: every vector body assigned to its generated type.
const lines = [];
const modules = [...new Set(typeChecks.map((t) => t[0]))];
for (const m of modules) lines.push(`import type { operations as ${m.replace(/\W/g, "_")} } from "./${m}.js";`);
typeChecks.forEach(([m, type, text, where], i) => {
  lines.push(`// ${where.replace(/\n/g, " ")}`);
  lines.push(`export const sample${i}: ${m.replace(/\W/g, "_")}${type.slice("operations".length)} = ${text};`);
});
writeFileSync(join(outDir, "samples.ts"), lines.join("\n") + "\n");
writeFileSync(join(outDir, "tsconfig.json"), JSON.stringify({
  compilerOptions: { strict: true, noEmit: true, target: "es2022", module: "nodenext", moduleResolution: "nodenext", skipLibCheck: false },
  files: ["samples.ts"],
}, null, 2));
try {
  execFileSync(join(here, "node_modules", ".bin", "tsc"), ["-p", join(outDir, "tsconfig.json")], { stdio: "pipe" });
  result(typeChecks.length > 0, `tsc type-checks ${typeChecks.length} vector bodies against the generated types`);
} catch (e) {
  result(false, `tsc type-checks ${typeChecks.length} vector bodies against the generated types`, String(e.stdout || e.message).slice(0, 600));
}

console.log(`schemacheck: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
