// Validates psync's Kubernetes manifests without a cluster:
//  1. renders each kustomization (base, overlays, examples) with the subset of kustomize it uses
//     (resources, namespace, patches by file, images), and, where `kubectl` is installed, checks that
//     `kubectl kustomize` renders the same objects;
//  2. type-checks every rendered object against Kubernetes' own API types (kubernetes-types) with
//     `tsc --strict --noEmit`: a wrong type or an unknown (misspelled) field fails. A self-test first
//     shows tsc rejecting a Deployment with `matchLabelz` and one with `replicas: "two"`;
//  3. runs every psync container's command line (and exec probe) against the real binaries: the
//     binary parses its flags (flagfiles from the ConfigMaps the pod mounts included) and exits, so a
//     flag it does not know, or a malformed value, fails;
//  4. checks cross-references: the PrometheusRule holds exactly deploy/prometheus/alerts.yml's groups,
//     and the example job's psync-agent targets the coordinator Service of an overlay.
//
//   node validate.mjs K8S_DIR PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL
// Needs node_modules (npm ci of package-lock.json) next to this file. Exits 0 when all pass.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const [k8sDir, coordinatorBin, agentBin, psyncctlBin] = process.argv.slice(2).map((p) => path.resolve(p));
if (!psyncctlBin) {
  console.error("usage: node validate.mjs K8S_DIR PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL");
  process.exit(2);
}
const kustomizations = ["base", "overlays/dev", "overlays/production", "overlays/replicas", "examples/training-job"];
const work = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), "k8s-validate-"));
let failures = 0;
function fail(message) {
  console.log(`FAIL: ${message}`);
  failures++;
}

// ---- 1. rendering -------------------------------------------------------------------------------

const clusterScoped = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"]);
// Strategic-merge keys of the lists psync's patches touch (as Kubernetes' schema declares them);
// any other list is replaced, as kustomize does for lists without a merge key.
const mergeKeys = {
  containers: "name", initContainers: "name", volumes: "name", env: "name",
  volumeMounts: "mountPath", ports: "containerPort",
};

function strategicMerge(target, patch) {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete target[key];
    } else if (Array.isArray(value) && mergeKeys[key] && Array.isArray(target[key])) {
      // Items new to the list go first, in the patch's order, as kustomize's strategic merge does.
      const mk = mergeKeys[key];
      const added = [];
      for (const item of value) {
        const existing = target[key].find((t) => t[mk] === item[mk]);
        if (existing) strategicMerge(existing, item);
        else added.push(structuredClone(item));
      }
      target[key] = [...added, ...target[key]];
    } else if (typeof value === "object" && !Array.isArray(value) && typeof target[key] === "object" &&
               target[key] !== null && !Array.isArray(target[key])) {
      strategicMerge(target[key], value);
    } else {
      target[key] = structuredClone(value);
    }
  }
}

// Kubernetes reads manifests as YAML 1.1 (0440 is octal 288), so do we.
const yaml11 = { version: "1.1" };
function readDocs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8"), yaml11).map((d) => {
    if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o != null);
}

const known = new Set(["apiVersion", "kind", "resources", "namespace", "patches", "images"]);
function render(dir) {
  const k = YAML.parse(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"), yaml11);
  for (const key of Object.keys(k)) {
    if (!known.has(key)) throw new Error(`${dir}/kustomization.yaml: '${key}' is outside the kustomize subset validate.mjs renders`);
  }
  const objects = [];
  for (const r of k.resources || []) {
    const p = path.join(dir, r);
    objects.push(...(fs.statSync(p).isDirectory() ? render(p) : readDocs(p)));
  }
  for (const patch of k.patches || []) {
    if (Object.keys(patch).join() !== "path") throw new Error(`${dir}: only 'patches: - path: FILE' is supported`);
    for (const p of readDocs(path.join(dir, patch.path))) {
      const target = objects.find((o) => o.kind === p.kind && o.metadata.name === p.metadata.name);
      if (!target) throw new Error(`${dir}/${patch.path}: no ${p.kind} ${p.metadata.name} to patch`);
      strategicMerge(target, p);
    }
  }
  if (k.namespace) {
    for (const o of objects) if (!clusterScoped.has(o.kind)) o.metadata.namespace = k.namespace;
  }
  for (const image of k.images || []) {
    for (const o of objects) {
      for (const c of containersOf(o)) {
        const [name, tag] = c.image.split(/:(?=[^/:]+$)/);
        if (name !== image.name) continue;
        c.image = `${image.newName || name}:${image.newTag || tag || "latest"}`;
      }
    }
  }
  return objects;
}

function podSpecOf(o) {
  if (o.kind === "Pod") return o.spec;
  if (["Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"].includes(o.kind)) return o.spec?.template?.spec;
  if (o.kind === "CronJob") return o.spec?.jobTemplate?.spec?.template?.spec;
  return undefined;
}
function containersOf(o) {
  const spec = podSpecOf(o);
  return spec ? [...(spec.initContainers || []), ...(spec.containers || [])] : [];
}

const byKey = (o) => `${o.kind}/${o.metadata.namespace || ""}/${o.metadata.name}`;
function canonical(objects) {
  const sortKeys = (v) => Array.isArray(v) ? v.map(sortKeys)
    : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])])) : v;
  return JSON.stringify([...objects].sort((a, b) => byKey(a).localeCompare(byKey(b))).map(sortKeys));
}

const rendered = {};
for (const k of kustomizations) {
  rendered[k] = render(path.join(k8sDir, k));
  console.log(`rendered ${k}: ${rendered[k].map(byKey).join(", ")}`);
}

const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
if (kubectl.status === 0) {
  for (const k of kustomizations) {
    const out = spawnSync("kubectl", ["kustomize", path.join(k8sDir, k)], { encoding: "utf8" });
    if (out.status !== 0) { fail(`kubectl kustomize ${k}: ${out.stderr}`); continue; }
    const theirs = YAML.parseAllDocuments(out.stdout, yaml11).map((d) => d.toJS()).filter((o) => o != null);
    if (canonical(theirs) !== canonical(rendered[k])) {
      fail(`kubectl kustomize ${k} renders differently from validate.mjs`);
      fs.writeFileSync(path.join(work, "kubectl.json"), canonical(theirs));
      fs.writeFileSync(path.join(work, "ours.json"), canonical(rendered[k]));
    } else {
      console.log(`PASS: kubectl kustomize ${k} renders the same ${theirs.length} objects`);
    }
  }
} else {
  console.log("note: kubectl is not installed; the overlays are rendered by validate.mjs alone");
}

// ---- 2. types -----------------------------------------------------------------------------------

const types = {
  "v1/ConfigMap": ["kubernetes-types/core/v1", "ConfigMap"],
  "v1/Secret": ["kubernetes-types/core/v1", "Secret"],
  "v1/Service": ["kubernetes-types/core/v1", "Service"],
  "v1/Namespace": ["kubernetes-types/core/v1", "Namespace"],
  "v1/ServiceAccount": ["kubernetes-types/core/v1", "ServiceAccount"],
  "apps/v1/Deployment": ["kubernetes-types/apps/v1", "Deployment"],
  "apps/v1/StatefulSet": ["kubernetes-types/apps/v1", "StatefulSet"],
  "batch/v1/Job": ["kubernetes-types/batch/v1", "Job"],
  "policy/v1/PodDisruptionBudget": ["kubernetes-types/policy/v1", "PodDisruptionBudget"],
  "networking.k8s.io/v1/NetworkPolicy": ["kubernetes-types/networking/v1", "NetworkPolicy"],
  "monitoring.coreos.com/v1/ServiceMonitor": ["./operator-types", "ServiceMonitor"],
  "monitoring.coreos.com/v1/PrometheusRule": ["./operator-types", "PrometheusRule"],
};

function typescriptOf(objects) {
  const lines = [];
  objects.forEach((o, i) => {
    const t = types[`${o.apiVersion}/${o.kind}`];
    if (!t) throw new Error(`no type for ${o.apiVersion} ${o.kind} (${o.metadata?.name}): add it to validate.mjs`);
    lines.push(`// ${byKey(o)}`);
    lines.push(`export const o${i}: import(${JSON.stringify(t[0])}).${t[1]} = ${JSON.stringify(o, null, 2)};`);
  });
  return lines.join("\n") + "\n";
}

const tsDir = path.join(work, "ts");
fs.mkdirSync(tsDir);
fs.copyFileSync(path.join(here, "operator-types.ts"), path.join(tsDir, "operator-types.ts"));
const tsFiles = {};
for (const k of kustomizations) {
  const file = path.join(tsDir, k.replaceAll("/", "-") + ".ts");
  fs.writeFileSync(file, typescriptOf(rendered[k]));
  tsFiles[file] = { expectErrorAbout: null, what: k };
}
// Self-test: two broken copies of the base Deployment that tsc must reject.
const deployment = rendered["base"].find((o) => o.kind === "Deployment");
const misspelled = structuredClone(deployment);
misspelled.spec.selector = { matchLabelz: misspelled.spec.selector.matchLabels };
const mistyped = structuredClone(deployment);
mistyped.spec.replicas = "two";
for (const [name, o, about] of [["selftest-misspelled", misspelled, "matchLabelz"], ["selftest-mistyped", mistyped, "replicas"]]) {
  const file = path.join(tsDir, `${name}.ts`);
  fs.writeFileSync(file, typescriptOf([o]));
  tsFiles[file] = { expectErrorAbout: about, what: name };
}
fs.writeFileSync(path.join(tsDir, "tsconfig.json"), JSON.stringify({
  compilerOptions: {
    strict: true, noEmit: true, target: "es2020", module: "es2020", moduleResolution: "node",
    typeRoots: [], types: [], baseUrl: ".", paths: { "kubernetes-types/*": [path.join(here, "node_modules/kubernetes-types/*")] },
  },
  files: ["operator-types.ts", ...Object.keys(tsFiles).map((f) => path.basename(f))],
}));
const tsc = spawnSync(process.execPath, [path.join(here, "node_modules/typescript/bin/tsc"), "-p", tsDir, "--pretty", "false"], { encoding: "utf8" });
const diagnostics = tsc.stdout.split("\n").filter((l) => l.includes("error TS"));
// A diagnostic starts with the file's path (relative to the working directory), then "(line,col)".
const fileOf = (line) => path.basename(line.slice(0, line.indexOf("(")));
for (const [file, { expectErrorAbout, what }] of Object.entries(tsFiles)) {
  const mine = diagnostics.filter((l) => fileOf(l) === path.basename(file));
  // The source line a diagnostic points at.
  const lines = fs.readFileSync(file, "utf8").split("\n");
  const lineOf = (l) => lines[Number(l.slice(l.indexOf("(") + 1).split(",")[0]) - 1] || "";
  if (expectErrorAbout === null) {
    if (mine.length) fail(`${what} does not type-check:\n  ${mine.join("\n  ")}`);
    else console.log(`PASS: ${what}: ${rendered[what].length} objects type-check against kubernetes-types (tsc --strict)`);
  } else if (mine.length !== 1 || !lineOf(mine[0]).includes(`"${expectErrorAbout}"`)) {
    fail(`self-test ${what}: tsc did not reject '${expectErrorAbout}' (${mine.join(" | ") || "no error"})`);
  } else {
    console.log(`PASS: self-test ${what}: tsc rejects '${lineOf(mine[0]).trim()}': ${mine[0].slice(mine[0].indexOf("error TS"))}`);
  }
}
const unattributed = diagnostics.filter((l) => !Object.keys(tsFiles).some((f) => fileOf(l) === path.basename(f)));
if (unattributed.length || (tsc.status !== 0 && diagnostics.length === 0)) fail(`tsc: ${unattributed.join("\n") || tsc.stdout + tsc.stderr}`);

// ---- 3. command lines ---------------------------------------------------------------------------

const binaries = { "psync-coordinator": coordinatorBin, "psync-agent": agentBin, psyncctl: psyncctlBin };
const imageEntrypoint = "psync-coordinator";  // deploy/container/Containerfile

// Replaces paths under a ConfigMap volume's mount with a file holding that ConfigMap's data.
function localFiles(arg, container, podSpec, objects, namespace) {
  return arg.replace(/\/[^\s=,]+/g, (p) => {
    for (const m of container.volumeMounts || []) {
      if (!p.startsWith(m.mountPath + "/")) continue;
      const volume = (podSpec.volumes || []).find((v) => v.name === m.name);
      if (!volume?.configMap) continue;
      const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === volume.configMap.name &&
        (o.metadata.namespace || "") === namespace);
      const key = p.slice(m.mountPath.length + 1);
      if (!cm || cm.data?.[key] === undefined) { fail(`${p}: no ConfigMap ${volume.configMap.name} key ${key}`); return p; }
      const file = path.join(work, `${cm.metadata.name}-${key}-${Math.random().toString(16).slice(2)}`);
      fs.writeFileSync(file, cm.data[key]);
      return file;
    }
    return p;
  });
}

// A binary's own check of its flags: absl binaries parse every flag and exit 0 on --version;
// psyncctl parses its flags and command and exits 0 on --help.
function checkCommandLine(where, argv) {
  const binary = binaries[path.basename(argv[0])];
  if (!binary) return false;
  const extra = path.basename(argv[0]) === "psyncctl" ? ["--help"] : ["--version"];
  const r = spawnSync(binary, [...argv.slice(1), ...extra], { encoding: "utf8" });
  if (r.status !== 0) fail(`${where}: '${argv.join(" ")}' is refused by ${path.basename(argv[0])} (exit ${r.status}): ${(r.stderr || "").trim().split("\n").slice(-2).join(" ")}`);
  else console.log(`PASS: ${where}: ${path.basename(argv[0])} accepts ${JSON.stringify(argv.slice(1))}`);
  return true;
}

// Self-test: a flag the coordinator does not know must fail.
{
  const r = spawnSync(coordinatorBin, ["--listen=0.0.0.0:7070", "--listne=1", "--version"], { encoding: "utf8" });
  if (r.status === 0) fail("self-test: psync-coordinator accepted an unknown flag --listne");
  else console.log("PASS: self-test: psync-coordinator refuses an unknown flag (--listne)");
}

let commandLines = 0;
for (const k of kustomizations) {
  for (const o of rendered[k]) {
    const spec = podSpecOf(o);
    if (!spec) continue;
    for (const c of containersOf(o)) {
      if (!/(^|\/)psync(:|$)/.test(c.image)) continue;
      const where = `${k} ${o.kind}/${o.metadata.name} container ${c.name}`;
      const argv = [...(c.command || [`/usr/local/bin/${imageEntrypoint}`]), ...(c.args || [])]
        .map((a) => localFiles(a, c, spec, rendered[k], o.metadata.namespace || ""));
      if (checkCommandLine(where, argv)) commandLines++;
      else fail(`${where}: runs '${argv[0]}', not a psync binary`);
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const exec = c[probe]?.exec?.command;
        if (exec && checkCommandLine(`${where} ${probe}`, exec)) commandLines++;
      }
    }
  }
}
if (commandLines === 0) fail("no psync command line found in the manifests");

// ---- 4. cross-references ------------------------------------------------------------------------

const alerts = YAML.parse(fs.readFileSync(path.join(k8sDir, "../prometheus/alerts.yml"), "utf8"), yaml11);
const rule = rendered["base"].find((o) => o.kind === "PrometheusRule");
if (!rule || JSON.stringify(rule.spec.groups) !== JSON.stringify(alerts.groups)) {
  fail("base/prometheusrule.yaml's spec.groups differ from deploy/prometheus/alerts.yml's groups");
} else {
  console.log(`PASS: the PrometheusRule holds alerts.yml's ${alerts.groups[0].rules.length} rules`);
}
const job = rendered["examples/training-job"].find((o) => o.kind === "Job");
const agent = job && podSpecOf(job).initContainers?.find((c) => (c.command || [])[0]?.endsWith("psync-agent"));
const target = agent?.args?.find((a) => a.startsWith("--target="))?.slice("--target=".length);
const services = ["overlays/dev", "overlays/production"].flatMap((k) => rendered[k].filter((o) => o.kind === "Service")
  .flatMap((s) => s.spec.ports.map((p) => `dns:///${s.metadata.name}.${s.metadata.namespace}:${p.port}`)));
if (!target || !services.includes(target)) {
  fail(`the example job's psync-agent --target '${target}' is none of the overlays' coordinator Services (${services.join(", ")})`);
} else {
  console.log(`PASS: the example job's psync-agent targets ${target}`);
}

if (failures) {
  console.log(`${failures} check(s) failed (work files in ${work})`);
  process.exit(1);
}
console.log("PASS: all manifest checks");
