// Validates rendered Kubernetes manifests (`kubectl kustomize` output on stdin, many YAML
// documents) against the Kubernetes OpenAPI schemas and prometheus-operator's CRD schemas, as
// shipped by the npm packages kubernetes-models and @kubernetes-models/prometheus-operator.
// An object of a kind with no schema here fails too: nothing is waved through unchecked.
// Usage: node validate_manifests.mjs NODE_MODULES_DIR < rendered.yaml
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
// By file path: the packages' "exports" maps differ between CommonJS and ES module builds.
const load = async (file, name) => (await import(pathToFileURL(join(modules, file)).href))[name];
const K8S = "kubernetes-models";
const PO = "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
const MODELS = {
  "v1/Namespace": [`${K8S}/v1/Namespace.mjs`, "Namespace"],
  "v1/Service": [`${K8S}/v1/Service.mjs`, "Service"],
  "v1/ConfigMap": [`${K8S}/v1/ConfigMap.mjs`, "ConfigMap"],
  "apps/v1/DaemonSet": [`${K8S}/apps/v1/DaemonSet.mjs`, "DaemonSet"],
  "monitoring.coreos.com/v1/ServiceMonitor": [`${PO}/ServiceMonitor.js`, "ServiceMonitor"],
  "monitoring.coreos.com/v1/PrometheusRule": [`${PO}/PrometheusRule.js`, "PrometheusRule"],
};

const yaml = await import(pathToFileURL(join(modules, "js-yaml/index.js")).href);
const docs = yaml.loadAll(readFileSync(0, "utf8")).filter((d) => d);
let failures = 0;
for (const doc of docs) {
  const key = `${doc.apiVersion}/${doc.kind}`;
  const name = `${doc.kind}/${doc.metadata?.name}`;
  if (!MODELS[key]) {
    console.log(`FAIL ${name}: no schema for ${key}`);
    failures++;
    continue;
  }
  try {
    const Model = await load(...MODELS[key]);
    new Model(doc).validate();
    console.log(`ok   ${name}`);
  } catch (err) {
    console.log(`FAIL ${name}: ${err.message}`);
    failures++;
  }
}
console.log(`${docs.length} objects, ${failures} invalid`);
process.exit(failures || docs.length === 0 ? 1 : 0);
