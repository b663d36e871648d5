// Validates psync's Grafana dashboard without a Grafana:
//  1. type-checks psync-dashboard.json against Grafana's own dashboard model (@grafana/schema 11.2,
//     the release whose dashboards are schemaVersion 39) with `tsc --strict --noEmit`: the whole
//     file as a Dashboard, each panel as a panel of its plugin (timeseries, stat: their options and
//     field config from @grafana/schema) with Prometheus targets (dashboard-types.ts). A wrong type,
//     an unknown (misspelled) field or a value outside one of Grafana's enums fails. A self-test first
//     shows tsc rejecting five broken copies;
//  2. checks what the types cannot: schemaVersion 39, the `datasource` and `job` variables, every
//     panel and target on the `datasource` variable, unique panel ids and refIds, panels inside the
//     24 grid columns and not overlapping, every $variable of a query defined.
//
//   node validate.mjs NODE_MODULES DASHBOARD_JSON
// NODE_MODULES holds typescript and @grafana/schema (npm ci of package-lock.json). Exits 0 when all
// pass.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const [nodeModules, dashboardFile] = process.argv.slice(2).map((p) => path.resolve(p));
if (!dashboardFile) {
  console.error("usage: node validate.mjs NODE_MODULES DASHBOARD_JSON");
  process.exit(2);
}
const work = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), "grafana-validate-"));
let failures = 0;
function fail(message) {
  console.log(`FAIL: ${message}`);
  failures++;
}
const dashboard = JSON.parse(fs.readFileSync(dashboardFile, "utf8"));
const name = path.basename(dashboardFile);

// Every panel, those nested in collapsed rows too, with the row it belongs to.
function allPanels(d) {
  const out = [];
  let row = null;
  for (const p of d.panels || []) {
    if (p.type === "row") {
      row = p;
      out.push({ panel: p, row: null });
      for (const q of p.panels || []) out.push({ panel: q, row: p });
    } else {
      out.push({ panel: p, row });
    }
  }
  return out;
}

// ---- 1. types -----------------------------------------------------------------------------------

const tsDir = path.join(work, "ts");
fs.mkdirSync(tsDir);
fs.symlinkSync(nodeModules, path.join(tsDir, "node_modules"), "dir");
fs.copyFileSync(path.join(here, "dashboard-types.ts"), path.join(tsDir, "dashboard-types.ts"));

function typescriptOf(d) {
  return [
    `import type * as G from "@grafana/schema";`,
    `import type { Dashboard, Json } from "./dashboard-types";`,
    `export const dashboard: Dashboard = ${JSON.stringify(d, null, 2)};`,
    // The same object is a dashboard of Grafana's plain model (its panels typed loosely there).
    `export const asGrafana: Json<G.Dashboard> = dashboard;`,
    "",
  ].join("\n");
}
const tsFiles = {};
const mainFile = path.join(tsDir, "dashboard.ts");
fs.writeFileSync(mainFile, typescriptOf(dashboard));
tsFiles[mainFile] = { expectErrorAbout: null, what: name };

// Self-test: broken copies that tsc must reject, each on the line of the broken field.
const selfTests = [
  ["selftest-misspelled", "gridPoz", (d) => {
    const p = d.panels.find((q) => q.type === "timeseries");
    p.gridPoz = p.gridPos;
    delete p.gridPos;
  }],
  ["selftest-mistyped", "schemaVersion", (d) => { d.schemaVersion = "39"; }],
  ["selftest-enum", "displayMode", (d) => {
    const p = d.panels.find((q) => q.type === "timeseries");
    p.options.legend.displayMode = "lists";
  }],
  ["selftest-target", "legendFromat", (d) => {
    const t = d.panels.find((q) => q.type === "timeseries").targets[0];
    t.legendFromat = t.legendFormat;
    delete t.legendFormat;
  }],
  ["selftest-threshold-mode", "mode", (d) => {
    const p = d.panels.find((q) => q.type === "stat");
    p.fieldConfig.defaults.thresholds.mode = "absolut";
  }],
];
for (const [file, about, breakIt] of selfTests) {
  const broken = structuredClone(dashboard);
  breakIt(broken);
  const f = path.join(tsDir, `${file}.ts`);
  fs.writeFileSync(f, typescriptOf(broken));
  tsFiles[f] = { expectErrorAbout: about, what: file };
}
fs.writeFileSync(path.join(tsDir, "tsconfig.json"), JSON.stringify({
  compilerOptions: {
    strict: true, noEmit: true, target: "es2020", module: "es2020", moduleResolution: "node",
    typeRoots: [], types: [], skipLibCheck: false,
  },
  files: ["dashboard-types.ts", ...Object.keys(tsFiles).map((f) => path.basename(f))],
}));
const tsc = spawnSync(process.execPath, [path.join(nodeModules, "typescript/bin/tsc"), "-p", tsDir, "--pretty", "false"],
  { encoding: "utf8", cwd: tsDir });
// A diagnostic starts with the file's path, then "(line,col)"; its continuation lines are indented.
const diagnostics = tsc.stdout.split("\n").filter((l) => l.includes("error TS"));
const fileOf = (line) => path.basename(line.slice(0, line.indexOf("(")));
for (const [file, { expectErrorAbout, what }] of Object.entries(tsFiles)) {
  const mine = diagnostics.filter((l) => fileOf(l) === path.basename(file));
  const lines = fs.readFileSync(file, "utf8").split("\n");
  const lineOf = (l) => lines[Number(l.slice(l.indexOf("(") + 1).split(",")[0]) - 1] || "";
  if (expectErrorAbout === null) {
    if (mine.length) fail(`${what} does not type-check:\n  ${mine.join("\n  ")}`);
    else {
      const n = allPanels(dashboard).filter((e) => e.panel.type !== "row").length;
      console.log(`PASS: ${what}: the dashboard and its ${n} panels type-check against @grafana/schema (tsc --strict)`);
    }
  } else if (mine.length !== 1 || !lineOf(mine[0]).includes(`"${expectErrorAbout}"`)) {
    fail(`self-test ${what}: tsc did not reject '${expectErrorAbout}' on its line (${mine.join(" | ") || "no error"})`);
  } else {
    console.log(`PASS: self-test ${what}: tsc rejects '${lineOf(mine[0]).trim()}': ${mine[0].slice(mine[0].indexOf("error TS"))}`);
  }
}
const unattributed = diagnostics.filter((l) => !Object.keys(tsFiles).some((f) => fileOf(l) === path.basename(f)));
if (unattributed.length || (tsc.status !== 0 && diagnostics.length === 0)) fail(`tsc: ${unattributed.join("\n") || tsc.stdout + tsc.stderr}`);

// ---- 2. what the types cannot say ----------------------------------------------------------------

const before = failures;
if (dashboard.schemaVersion !== 39) fail(`schemaVersion is ${dashboard.schemaVersion}, not 39`);
if (!dashboard.uid || !dashboard.title) fail("the dashboard needs a uid and a title");
const variables = dashboard.templating?.list || [];
const byName = Object.fromEntries(variables.map((v) => [v.name, v]));
const ds = byName.datasource;
if (!ds || ds.type !== "datasource" || ds.query !== "prometheus") {
  fail('no template variable "datasource" of type datasource with query "prometheus"');
}
const job = byName.job;
const jobQuery = typeof job?.query === "object" ? job.query.query : job?.query;
if (!job || job.type !== "query" || jobQuery !== "label_values(psync_active_ranks, job)" ||
    !job.multi || !job.includeAll || job.datasource?.uid !== "${datasource}") {
  fail('the "job" variable must be a query variable on ${datasource}, label_values(psync_active_ranks, job), multi, with All');
}
const builtins = new Set(["__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
  "__range_ms", "__from", "__to", "__dashboard", "__name", "__org", "__user", "__all"]);
const ids = new Map();
const cells = new Map();  // layout (top level, or a collapsed row's panels) -> occupied grid cells
let targets = 0;
for (const { panel: p, row } of allPanels(dashboard)) {
  const where = `panel ${p.id} "${p.title}"`;
  if (ids.has(p.id)) fail(`${where}: id ${p.id} also used by "${ids.get(p.id)}"`);
  ids.set(p.id, p.title);
  const g = p.gridPos;
  if (!g || g.x < 0 || g.w < 1 || g.x + g.w > 24 || g.h < 1 || g.y < 0) {
    fail(`${where}: gridPos ${JSON.stringify(g)} is outside the 24 grid columns`);
  } else {
    const layout = row && row.collapsed ? `row ${row.id}` : "top";
    if (!cells.has(layout)) cells.set(layout, new Map());
    const taken = cells.get(layout);
    for (let x = g.x; x < g.x + g.w; x++) {
      for (let y = g.y; y < g.y + g.h; y++) {
        const other = taken.get(`${x},${y}`);
        if (other !== undefined) {
          fail(`${where}: overlaps panel ${other} at column ${x}, row ${y}`);
          x = g.x + g.w;
          break;
        }
        taken.set(`${x},${y}`, p.id);
      }
    }
  }
  if (p.type === "row") continue;
  if (p.datasource?.uid !== "${datasource}") fail(`${where}: its datasource is not \${datasource}`);
  const refIds = new Set();
  for (const t of p.targets || []) {
    targets++;
    if (refIds.has(t.refId)) fail(`${where}: refId ${t.refId} twice`);
    refIds.add(t.refId);
    if (t.datasource?.uid !== "${datasource}") fail(`${where} ${t.refId}: its datasource is not \${datasource}`);
    if (!t.expr?.trim()) fail(`${where} ${t.refId}: empty expr`);
    for (const m of (t.expr || "").matchAll(/\$\{?(\w+)/g)) {
      if (!byName[m[1]] && !builtins.has(m[1])) fail(`${where} ${t.refId}: $${m[1]} is no variable of the dashboard`);
    }
  }
  if (!refIds.size) fail(`${where}: no query`);
}
if (failures === before) {
  const rows = allPanels(dashboard).filter((e) => e.panel.type === "row").length;
  console.log(`PASS: ${name}: schemaVersion 39, variables datasource and job, ${ids.size - rows} panels and ` +
    `${rows} rows with unique ids inside the grid, not overlapping, ${targets} queries on \${datasource} ` +
    `with known variables`);
}
fs.rmSync(work, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
