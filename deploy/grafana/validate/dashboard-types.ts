// The types validate.mjs checks psync-dashboard.json against, built from Grafana's own
// (@grafana/schema 11.2: the dashboard model, and the options and field config of the timeseries
// and stat panels), plus the Prometheus query of a panel target, which @grafana/schema does not
// ship: transcribed from Grafana's PrometheusDataQuery schema (packages/grafana-prometheus
// dataquery.gen.ts; the CUE in grafana/cog schemas/composable/prometheus/dataquery.cue). A field the
// dashboard needs that is missing here must be added from that schema, not loosened.
import type * as G from "@grafana/schema";
import type * as TimeSeries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";
import type * as Stat from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen";

// A JSON file spells a member of a TypeScript string enum by its value: "absolute" for
// ThresholdsMode.Absolute. Json<T> is T with every string enum replaced by the union of its values
// (numeric enums take plain numbers already); nothing else changes, so unknown fields and wrong
// types still fail.
export type Json<T> = T extends string
  ? string extends T ? string : `${T}`
  : T extends readonly (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

// The dashboard reaches its Prometheus through the `datasource` template variable.
export interface PrometheusRef {
  type: "prometheus";
  uid: "${datasource}";
}

export interface PrometheusQuery extends Omit<G.DataQuery, "datasource"> {
  datasource?: PrometheusRef;
  // The actual expression/query that will be evaluated by Prometheus
  expr: string;
  // Returns only the latest value that Prometheus has scraped for the requested time series
  instant?: boolean;
  // Returns a range vector, comprised of a set of time series over time
  range?: boolean;
  // Execute an additional query to identify interesting raw samples relevant for the given expr
  exemplar?: boolean;
  // Which editor prepared the query
  editorMode?: "code" | "builder";
  // How the panel displays the data points
  format?: "time_series" | "table" | "heatmap";
  // Series name override or template, e.g. {{job}}
  legendFormat?: string;
  // @deprecated: divides max data points
  intervalFactor?: number;
  // Lower limit of the query step
  interval?: string;
}

// Grafana's field config with the panel plugin's own `custom` options (and nothing else there).
type FieldConfigSourceOf<Custom> = Omit<G.FieldConfigSource, "defaults"> & {
  defaults: Omit<G.FieldConfig, "custom"> & { custom?: Custom };
};

// A panel of one plugin: Grafana's Panel with that plugin's options and field config, Prometheus
// targets on the dashboard's data source.
type PanelOf<Type extends string, Options, Custom> = Omit<
  G.Panel,
  "type" | "options" | "fieldConfig" | "targets" | "datasource"
> & {
  type: Type;
  datasource: PrometheusRef;
  options: Options;
  fieldConfig: FieldConfigSourceOf<Custom>;
  targets: PrometheusQuery[];
};

export type TimeSeriesPanel = Json<PanelOf<"timeseries", TimeSeries.Options, TimeSeries.FieldConfig>>;
export type StatPanel = Json<PanelOf<"stat", Stat.Options, Record<string, never>>>;
export type Panel = TimeSeriesPanel | StatPanel;
export type RowPanel = Json<Omit<G.RowPanel, "panels">> & { panels: Panel[] };

// The whole dashboard as Grafana's Dashboard model, its panels the ones above.
export type Dashboard = Json<Omit<G.Dashboard, "panels">> & { panels: Array<Panel | RowPanel> };
