/**
 * The Event / Summary protobufs torch.utils.tensorboard writes (field
 * numbers of TensorBoard's event.proto, summary.proto, histogram.proto,
 * tensor.proto and the hparams plugin's api.proto / plugin_data.proto), and
 * the histogram of `add_histogram` over SummaryWriter's default
 * 'tensorflow' bins.
 * @module
 */

import { ProtoWriter } from "./proto.ts";

/** What an event carries besides its time and step. */
export type EventBody =
  | { fileVersion: string }
  | { summaryValue: Uint8Array }
  | { sessionLogStart: true };

/** An encoded `Event`; `step` undefined leaves the step out (0 is left out too, as in proto3). */
export function encodeEvent(
  wallTime: number,
  step: number | undefined,
  body: EventBody,
): Uint8Array {
  const w = new ProtoWriter().double(1, wallTime);
  if (step !== undefined) w.int(2, step);
  if ("fileVersion" in body) w.bytes(3, body.fileVersion, true);
  else if ("summaryValue" in body) {
    w.bytes(5, new ProtoWriter().bytes(1, body.summaryValue, true).finish(), true);
  } else w.bytes(7, new ProtoWriter().int(1, 1).finish(), true); // SessionLog{status: START}
  return w.finish();
}

function pluginMetadata(pluginName: string, content: Uint8Array): Uint8Array {
  const data = new ProtoWriter().bytes(1, pluginName).bytes(2, content).finish();
  return new ProtoWriter().bytes(1, data, true).finish();
}

/** `Summary.Value{tag, simple_value}` (the value rounded to float32, as the proto field is). */
export function scalarValue(tag: string, value: number): Uint8Array {
  return new ProtoWriter().bytes(1, tag).float(2, value, true).finish();
}

/** `summary.text`: a DT_STRING tensor of shape [1] under `<tag>/text_summary`, text plugin. */
export function textValue(tag: string, text: string): Uint8Array {
  const shape = new ProtoWriter().bytes(2, new ProtoWriter().int(1, 1).finish(), true).finish();
  const tensor = new ProtoWriter().int(1, 7).bytes(2, shape, true).bytes(8, text, true).finish();
  return new ProtoWriter()
    .bytes(1, tag + "/text_summary")
    .bytes(8, tensor, true)
    .bytes(9, pluginMetadata("text", new Uint8Array(0)), true)
    .finish();
}

/**
 * PyTorch's `compute_curve` (summary.py): for predictions binned into `numThresholds` buckets
 * (`floor(p · (numThresholds - 1))` in the predictions' precision, as numpy multiplies: float32
 * for a Float32Array, else float64; outside [0, numThresholds - 1]: left out), the
 * weighted true and false positives per bucket summed as np.histogram's bincount does (in blocks
 * of 65,536), their reverse cumulative sums, and the rows tp, fp, tn, fn, precision, recall.
 */
export function prCurveRows(
  labels: ArrayLike<number>,
  predictions: ArrayLike<number>,
  numThresholds: number,
  weights?: ArrayLike<number>,
): Float64Array[] {
  const [tpBuckets, fpBuckets] = [new Float64Array(numThresholds), new Float64Array(numThresholds)];
  const BLOCK = 65536;
  // A value just below a threshold rounds up into the next bucket in float32 but not in float64.
  const single = predictions instanceof Float32Array;
  for (let start = 0; start < predictions.length; start += BLOCK) {
    const [tp, fp] = [new Float64Array(numThresholds), new Float64Array(numThresholds)];
    for (let i = start; i < Math.min(start + BLOCK, predictions.length); i++) {
      const scaled = predictions[i] * (numThresholds - 1);
      const bucket = Math.floor(single ? Math.fround(scaled) : scaled);
      if (!(bucket >= 0 && bucket <= numThresholds - 1)) continue;
      const label = labels[i];
      const weight = weights ? weights[i] : 1.0;
      tp[bucket] += label * weight;
      fp[bucket] += (1.0 - label) * weight;
    }
    for (let k = 0; k < numThresholds; k++) {
      tpBuckets[k] += tp[k];
      fpBuckets[k] += fp[k];
    }
  }
  const reverseCumsum = (b: Float64Array) => {
    const out = new Float64Array(b.length);
    let sum = 0;
    for (let k = b.length - 1; k >= 0; k--) out[k] = sum += b[k];
    return out;
  };
  const tp = reverseCumsum(tpBuckets);
  const fp = reverseCumsum(fpBuckets);
  const tn = fp.map((v) => fp[0] - v);
  const fn = tp.map((v) => tp[0] - v);
  const precision = tp.map((v, k) => v / Math.max(1e-7, v + fp[k]));
  const recall = tp.map((v, k) => v / Math.max(1e-7, v + fn[k]));
  return [tp, fp, tn, fn, precision, recall];
}

/**
 * `summary.pr_curve`: a DT_FLOAT tensor of the six rows of {@link prCurveRows}, shape
 * [6, numThresholds], with the pr_curves plugin's `PrCurvePluginData{num_thresholds}`.
 */
export function prCurveValue(tag: string, rows: Float64Array[]): Uint8Array {
  const dim = (size: number) => new ProtoWriter().int(1, size).finish();
  const shape = new ProtoWriter().bytes(2, dim(rows.length), true)
    .bytes(2, dim(rows[0].length), true).finish();
  const values = new Float64Array(rows.length * rows[0].length);
  rows.forEach((row, i) => values.set(row, i * row.length));
  const tensor = new ProtoWriter().int(1, 1).bytes(2, shape, true).packedFloats(5, values).finish();
  const content = new ProtoWriter().int(2, rows[0].length).finish();
  return new ProtoWriter()
    .bytes(1, tag)
    .bytes(8, tensor, true)
    .bytes(9, pluginMetadata("pr_curves", content), true)
    .finish();
}

/** `Summary.Value{tag, image}`: `Summary.Image{height, width, colorspace, encoded_image_string}`. */
export function imageValue(
  tag: string,
  height: number,
  width: number,
  colorspace: number,
  png: Uint8Array,
): Uint8Array {
  const image = new ProtoWriter().int(1, height).int(2, width).int(3, colorspace).bytes(4, png)
    .finish();
  return new ProtoWriter().bytes(1, tag).bytes(4, image, true).finish();
}

/** The fields of a `HistogramProto`. */
export interface Histogram {
  min: number;
  max: number;
  num: number;
  sum: number;
  sumSquares: number;
  bucketLimit: number[];
  bucket: number[];
}

/** `Summary.Value{tag, histo}`. */
export function histogramValue(tag: string, h: Histogram): Uint8Array {
  const histo = new ProtoWriter()
    .double(1, h.min).double(2, h.max).double(3, h.num).double(4, h.sum)
    .double(5, h.sumSquares).packedDoubles(6, h.bucketLimit).packedDoubles(7, h.bucket)
    .finish();
  return new ProtoWriter().bytes(1, tag).bytes(5, histo, true).finish();
}

let tensorflowBins: Float64Array | undefined;

/**
 * SummaryWriter's default bin edges: ±1e-12·1.1^k below 1e20 and 0, built
 * by the same float64 multiplications as PyTorch, so the edges are equal.
 */
export function defaultBins(): Float64Array {
  if (tensorflowBins) return tensorflowBins;
  const pos: number[] = [];
  for (let v = 1e-12; v < 1e20; v *= 1.1) pos.push(v);
  const edges = new Float64Array(pos.length * 2 + 1);
  for (let i = 0; i < pos.length; i++) {
    edges[pos.length - 1 - i] = -pos[i];
    edges[pos.length + 1 + i] = pos[i];
  }
  return (tensorflowBins = edges);
}

/**
 * np.histogram's edges for a count of equal bins: np.linspace from the
 * smallest to the largest value (widened by ±0.5 when they are equal), the
 * last edge exactly the largest.
 */
export function uniformEdges(values: Float64Array, count: number): Float64Array {
  let first = Infinity, last = -Infinity;
  for (const v of values) {
    if (v < first) first = v;
    if (v > last) last = v;
  }
  if (first === last) [first, last] = [first - 0.5, last + 0.5];
  const edges = new Float64Array(count + 1);
  const step = (last - first) / count;
  for (let i = 0; i < count; i++) {
    edges[i] = step === 0 ? (i / count) * (last - first) + first : i * step + first;
  }
  edges[count] = last;
  return edges;
}

// numpy's pairwise summation (add.reduce on a contiguous float64 array): the
// first element, plus blocks of 8 partial sums below 128 elements, halves above.
function pairwise(a: Float64Array, lo: number, n: number): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[lo + i];
    return res;
  }
  if (n <= 128) {
    const r = Array.from(a.subarray(lo, lo + 8));
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] += a[lo + i + j];
    let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[lo + i];
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwise(a, lo, n2) + pairwise(a, lo + n2, n - n2);
}

/** `values.sum()` as numpy computes it for a float64 vector. */
export function numpySum(a: Float64Array): number {
  return pairwise(a, 0, a.length);
}

/** numpy's automatic bin estimators (np.histogram's `bins="auto"`...), but "stone". */
export const BIN_RULES = ["auto", "fd", "doane", "scott", "rice", "sturges", "sqrt"] as const;

/** One of {@link BIN_RULES}. */
export type BinRule = typeof BIN_RULES[number];

/** np.percentile(sorted, 100·q) (its default "linear" method, numpy 1.24's arithmetic). */
function percentile(sorted: Float64Array, q: number): number {
  const n = sorted.length;
  const virtual = n * q + (1 - q) - 1;
  const previous = Math.min(Math.max(Math.floor(virtual), 0), n - 1);
  const next = Math.min(previous + 1, n - 1);
  const gamma = virtual - Math.floor(virtual);
  const [a, b] = [sorted[previous], sorted[next]];
  const diff = b - a;
  return gamma >= 0.5 ? b - diff * (1 - gamma) : a + diff * gamma;
}

/** np.std (population) of a float64 vector: pairwise sums of the values and the squared deviations. */
function numpyStd(a: Float64Array): number {
  const mean = numpySum(a) / a.length;
  const squares = a.map((v) => (v - mean) * (v - mean));
  return Math.sqrt(numpySum(squares) / a.length);
}

/**
 * np.histogram_bin_edges(values, bins=rule): numpy's bin width for `rule`, then
 * `ceil(ptp / width)` equal bins over the values' range (one where the width is 0).
 */
export function ruleEdges(values: Float64Array, rule: BinRule): Float64Array {
  const n = values.length;
  let min = Infinity, max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const ptp = max - min;
  const sturges = () => ptp / (Math.log2(n) + 1.0);
  const fd = () => {
    const sorted = values.slice().sort();
    return 2.0 * (percentile(sorted, 0.75) - percentile(sorted, 0.25)) * n ** (-1.0 / 3.0);
  };
  const doane = () => {
    if (n <= 2) return 0;
    const sg1 = Math.sqrt(6.0 * (n - 2) / ((n + 1.0) * (n + 3)));
    const sigma = numpyStd(values);
    if (!(sigma > 0)) return 0;
    const mean = numpySum(values) / n;
    const g1 = numpySum(values.map((v) => ((v - mean) / sigma) ** 3)) / n;
    return ptp / (1.0 + Math.log2(n) + Math.log2(1.0 + Math.abs(g1) / sg1));
  };
  const widths: Record<BinRule, () => number> = {
    auto: () => {
      const f = fd();
      return f ? Math.min(f, sturges()) : sturges();
    },
    fd,
    doane,
    scott: () => (24.0 * Math.PI ** 0.5 / n) ** (1.0 / 3.0) * numpyStd(values),
    rice: () => ptp / (2.0 * n ** (1.0 / 3)),
    sturges,
    sqrt: () => ptp / Math.sqrt(n),
  };
  const width = widths[rule]();
  const [first, last] = min === max ? [min - 0.5, max + 0.5] : [min, max];
  return uniformEdges(values, width ? Math.ceil((last - first) / width) : 1);
}

// First index i with sorted[i] >= x (left) or > x (right).
function search(sorted: Float64Array, x: number, right: boolean): number {
  let lo = 0, hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (right ? sorted[mid] <= x : sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The histogram of `make_histogram(values, bins, max_bins)`: np.histogram
 * counts over the edges (values outside them not counted, the last bin
 * closed), optionally merged down to at most `maxBins`, then trimmed to the
 * bins holding values with one empty bin on the left (TensorBoard keeps only
 * right limits). `values` must be finite and non-empty (checked by the caller).
 */
export function makeHistogram(
  values: Float64Array,
  edges: ArrayLike<number>,
  maxBins?: number,
): Histogram {
  const sorted = values.slice().sort();
  const nb = edges.length - 1;
  let counts: number[] = [];
  let prev = search(sorted, edges[0], false);
  for (let i = 1; i <= nb; i++) {
    const next = search(sorted, edges[i], i === nb);
    counts.push(next - prev);
    prev = next;
  }
  let limits = Array.from(edges);
  if (maxBins !== undefined && counts.length > maxBins) {
    const sub = Math.floor(counts.length / maxBins);
    const rem = counts.length % sub;
    if (rem !== 0) counts = counts.concat(new Array(sub - rem).fill(0));
    const merged: number[] = [];
    for (let i = 0; i < counts.length; i += sub) {
      let s = 0;
      for (let j = 0; j < sub; j++) s += counts[i + j];
      merged.push(s);
    }
    const newLimits: number[] = [];
    for (let i = 0; i < merged.length; i++) newLimits.push(limits[i * sub]);
    newLimits.push(limits[limits.length - 1]);
    counts = merged;
    limits = newLimits;
  }
  const start = counts.findIndex((c) => c > 0);
  if (start < 0) {
    throw new Error(
      `addHistogram: no value lies within the bins [${limits[0]}, ${limits[limits.length - 1]}]`,
    );
  }
  let last = counts.length - 1;
  while (counts[last] === 0) last--;
  const end = last + 1;
  const bucket = start > 0 ? counts.slice(start - 1, end) : [0, ...counts.slice(0, end)];
  const bucketLimit = limits.slice(start, end + 1);
  let min = Infinity, max = -Infinity, sumSquares = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v < min) min = v;
    if (v > max) max = v;
    sumSquares += v * v;
  }
  return { min, max, num: values.length, sum: numpySum(values), sumSquares, bucketLimit, bucket };
}

/**
 * A chart of `add_custom_scalars`' layout: `["Multiline", tags]` draws the scalars of the tags
 * (regular expressions) as lines on one chart; `["Margin", [value, lower, upper]]` draws the
 * scalar `value` between the scalars `lower` and `upper`.
 */
export type CustomScalarChart = ["Multiline", string[]] | ["Margin", [string, string, string]];

/** `add_custom_scalars`' layout: `{category: {chart title: chart}}`. */
export type CustomScalarLayout = Record<string, Record<string, CustomScalarChart>>;

/**
 * `summary.custom_scalars(layout)`: the custom_scalar plugin's `Layout{category: [Category{title,
 * chart: [Chart{title, multiline{tag} | margin{series: [{value, lower, upper}]}}]}]}`, serialized
 * into a DT_STRING tensor (no shape) under the tag `custom_scalars__config__`. Categories and
 * charts in the objects' key order. The caller checks the layout.
 */
export function customScalarsValue(layout: CustomScalarLayout): Uint8Array {
  const categories = new ProtoWriter();
  for (const [categoryTitle, charts] of Object.entries(layout)) {
    const category = new ProtoWriter().bytes(1, categoryTitle);
    for (const [chartTitle, [kind, tags]] of Object.entries(charts)) {
      const chart = new ProtoWriter().bytes(1, chartTitle);
      if (kind === "Margin") {
        const series = new ProtoWriter().bytes(1, tags[0]).bytes(2, tags[1]).bytes(3, tags[2]);
        chart.bytes(3, new ProtoWriter().bytes(1, series.finish(), true).finish(), true);
      } else {
        const multiline = new ProtoWriter();
        for (const tag of tags) multiline.bytes(1, tag, true);
        chart.bytes(2, multiline.finish(), true);
      }
      category.bytes(2, chart.finish(), true);
    }
    categories.bytes(2, category.finish(), true);
  }
  const tensor = new ProtoWriter().int(1, 7) // DT_STRING
    .bytes(2, new Uint8Array(0), true) // an empty TensorShapeProto, set
    .bytes(8, categories.finish(), true).finish();
  return new ProtoWriter()
    .bytes(1, "custom_scalars__config__")
    .bytes(8, tensor, true)
    .bytes(9, pluginMetadata("custom_scalars", new Uint8Array(0)), true)
    .finish();
}
