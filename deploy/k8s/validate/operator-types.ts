// The fields of the Prometheus operator's ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1)
// that psync's manifests may use, transcribed from the operator's API reference
// (prometheus-operator.dev/docs/api-reference/api). kubernetes-types covers only Kubernetes' own
// kinds; these strict declarations make tsc reject misspelled or mistyped fields of the two custom
// resources as it does for the built-in ones. A field the manifests need that is missing here must be
// added from that reference.
import type { LabelSelector, ObjectMeta } from "kubernetes-types/meta/v1";
import type { SecretKeySelector } from "kubernetes-types/core/v1";

export interface SafeTLSConfig {
  ca?: { secret?: SecretKeySelector; configMap?: { name: string; key: string } };
  cert?: { secret?: SecretKeySelector; configMap?: { name: string; key: string } };
  keySecret?: SecretKeySelector;
  serverName?: string;
  insecureSkipVerify?: boolean;
}

export interface Endpoint {
  port?: string;
  targetPort?: number | string;
  path?: string;
  scheme?: "http" | "https";
  interval?: string;
  scrapeTimeout?: string;
  honorLabels?: boolean;
  honorTimestamps?: boolean;
  tlsConfig?: SafeTLSConfig;
  authorization?: { type?: string; credentials?: SecretKeySelector };
  bearerTokenSecret?: SecretKeySelector;
}

export interface ServiceMonitor {
  apiVersion: "monitoring.coreos.com/v1";
  kind: "ServiceMonitor";
  metadata: ObjectMeta;
  spec: {
    jobLabel?: string;
    targetLabels?: string[];
    podTargetLabels?: string[];
    selector: LabelSelector;
    namespaceSelector?: { any?: boolean; matchNames?: string[] };
    endpoints: Endpoint[];
  };
}

export interface Rule {
  alert?: string;
  record?: string;
  expr: string | number;
  for?: string;
  keep_firing_for?: string;
  labels?: { [name: string]: string };
  annotations?: { [name: string]: string };
}

export interface PrometheusRule {
  apiVersion: "monitoring.coreos.com/v1";
  kind: "PrometheusRule";
  metadata: ObjectMeta;
  spec: {
    groups: { name: string; interval?: string; limit?: number; rules: Rule[] }[];
  };
}
