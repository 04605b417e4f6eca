/**
 * `torch.utils.tensorboard.SummaryWriter`: event files TensorBoard reads,
 * byte for byte what PyTorch 1.13 writes for the same values and times.
 * @module
 */

import { isFloat } from "../../dtype.ts";
import { Tensor } from "../../tensor.ts";
import { frameRecord } from "./record.ts";
import {
  BIN_RULES,
  type BinRule,
  type CustomScalarChart,
  type CustomScalarLayout,
  customScalarsValue,
  defaultBins,
  encodeEvent,
  histogramValue,
  imageValue,
  makeHistogram,
  prCurveRows,
  prCurveValue,
  ruleEdges,
  scalarValue,
  textValue,
  uniformEdges,
} from "./summary.ts";
import { hparamsValues, type HparamValue } from "./hparams.ts";
import { checkImage, concat, encodePng, imagePixels } from "./image.ts";
import { audioValue, encodeWav, wavFrameRate } from "./audio.ts";
import {
  type EmbeddingInfo,
  encodeTag,
  metadataTsv,
  type MetadataValue,
  projectorPbtxt,
  spritePixels,
  spriteSize,
  tensorsTsv,
  zfill5,
} from "./embedding.ts";

export type { BinRule, CustomScalarChart, CustomScalarLayout } from "./summary.ts";
export type { MetadataValue } from "./embedding.ts";

/** Options of {@link SummaryWriter} (`SummaryWriter(log_dir=, comment=, ...)`). */
export interface SummaryWriterOptions {
  /** Where the event files go; default `runs/<Mon DD_HH-MM-SS>_<hostname><comment>`. */
  logDir?: string;
  /** Appended to the default `logDir` (ignored when `logDir` is given). */
  comment?: string;
  /** On a restart at this step, TensorBoard hides the earlier events from this step on. */
  purgeStep?: number;
  /** Pending events that trigger a write to the file (default 10). */
  maxQueue?: number;
  /** Seconds after which pending events are written anyway (default 120). */
  flushSecs?: number;
  /** Appended to every event file name. */
  filenameSuffix?: string;
}

/** Options of {@link SummaryWriter.addPrCurve}. */
export interface PrCurveOptions {
  /** Thresholds (buckets of the predictions), at least 2; over 127 is 127, as in PyTorch. Default 127. */
  numThresholds?: number;
  /** A weight per example (a tensor or numbers; default 1 each). */
  weights?: Tensor | ArrayLike<number>;
  /** Seconds since the epoch to record (default: now). */
  walltime?: number;
}

/** Options of {@link SummaryWriter.addImage} and {@link SummaryWriter.addImages}. */
export interface ImageOptions {
  /** Seconds since the epoch to record (default: now). */
  walltime?: number;
  /**
   * The tensor's layout: one letter per dimension (`"CHW"`, `"HWC"`, `"HW"` for addImage,
   * default `"CHW"`; `"NCHW"`, `"NHWC"` for addImages, default `"NCHW"`).
   */
  dataformats?: string;
}

/** Options of {@link SummaryWriter.addHistogram}. */
export interface HistogramOptions {
  /**
   * `"tensorflow"` (default: PyTorch's ±1e-12·1.1^k edges), increasing bin
   * edges, a count of equal bins between the smallest and largest value, or
   * one of numpy's estimators of that count (`"auto"`, `"fd"`, `"doane"`,
   * `"scott"`, `"rice"`, `"sturges"`, `"sqrt"`; not `"stone"`).
   */
  bins?: "tensorflow" | BinRule | number | number[];
  /** Merge neighbouring bins down to at most this many. */
  maxBins?: number;
  /** Seconds since the epoch recorded with the event (default: now). */
  walltime?: number;
}

/** Options of {@link SummaryWriter.addAudio}. */
export interface AudioOptions {
  /** Samples a second (default 44100); the WAV header holds it rounded half to even. */
  sampleRate?: number;
}

/** Options of {@link SummaryWriter.addEmbedding}. */
export interface EmbeddingOptions {
  /**
   * A label per data point (`metadata.tsv`), or with `metadataHeader` a row of columns per
   * data point. Written as Python's `str()`: an integral number as an int, others as floats.
   */
  metadata?: (MetadataValue | MetadataValue[])[];
  /** An image per data point, `[N, C, H, W]` (C 1 or 3, values in [0, 1]): the sprite. */
  labelImg?: Tensor;
  /** An integer, default 0: the directory `<step as 5 digits>/<tag>` holds the files. */
  globalStep?: number;
  /** The embedding's name (default `"default"`). */
  tag?: string;
  /** The column names of multi-column `metadata`. */
  metadataHeader?: MetadataValue[];
}

/** Options of the custom-scalar chart shorthands of {@link SummaryWriter}. */
export interface CustomScalarChartOptions {
  /** The layout's category (default `"default"`). */
  category?: string;
  /** The chart's title (default `"untitled"`). */
  title?: string;
}

/** A hyperparameter for {@link SummaryWriter.addHparams}. */
export type Hparam = number | string | boolean | Tensor | null | undefined;

/** Options of {@link SummaryWriter.addHparams}. */
export interface HparamsOptions {
  /** The discrete values each hyperparameter can take (same type as its value). */
  hparamDomainDiscrete?: Record<string, (number | string | boolean)[]>;
  /** The run's sub-directory of the log directory (default: the current time in seconds). */
  runName?: string;
}

let globalUid = 0;

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

function needDeno(): void {
  if (typeof Deno === "undefined") {
    throw new Error("SummaryWriter writes event files, which needs Deno's file system");
  }
}

// os.path.join of two parts.
function joinPath(a: string, b: string): string {
  if (b.startsWith("/") || a === "") return b;
  return a.endsWith("/") ? a + b : `${a}/${b}`;
}

function defaultLogDir(comment: string): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, "0");
  const time = `${MONTHS[d.getMonth()]}${p(d.getDate())}_${p(d.getHours())}-${p(d.getMinutes())}-${
    p(d.getSeconds())
  }`;
  return joinPath("runs", `${time}_${Deno.hostname()}${comment}`);
}

function now(): number {
  return Date.now() / 1000;
}

/** One event file (TensorBoard's EventFileWriter): created, with its first event, at once. */
class EventFileWriter {
  readonly logDir: string;
  readonly path: string;
  #file: Deno.FsFile;
  #pending: Uint8Array[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #error: unknown = undefined;
  #maxQueue: number;
  #flushSecs: number;
  #closed = false;
  /**
   * Writes what is pending when the program ends with the writer never
   * closed (its timer does not keep the program alive): PyTorch's daemon
   * thread loses those last events, which are often a run's final steps.
   */
  readonly #atExit = () => {
    if (this.#closed || this.#pending.length === 0) return;
    const chunk = concat(this.#pending);
    this.#pending = [];
    for (let off = 0; off < chunk.length;) off += this.#file.writeSync(chunk.subarray(off));
  };

  constructor(logDir: string, maxQueue: number, flushSecs: number, suffix: string) {
    needDeno();
    this.logDir = logDir;
    this.#maxQueue = maxQueue;
    this.#flushSecs = flushSecs;
    Deno.mkdirSync(logDir, { recursive: true });
    const seconds = String(Math.trunc(now())).padStart(10, "0");
    const name = `events.out.tfevents.${seconds}.${Deno.hostname()}.${Deno.pid}.${globalUid++}`;
    this.path = joinPath(logDir, name) + suffix;
    this.#file = Deno.openSync(this.path, { write: true, create: true, truncate: true });
    // As TensorBoard, the file-version event is on disk before the constructor returns.
    const first = frameRecord(encodeEvent(now(), undefined, { fileVersion: "brain.Event:2" }));
    for (let off = 0; off < first.length;) off += this.#file.writeSync(first.subarray(off));
    globalThis.addEventListener?.("unload", this.#atExit);
  }

  add(event: Uint8Array): void {
    this.#pending.push(frameRecord(event));
    if (this.#pending.length >= this.#maxQueue) this.#drain();
    else if (this.#timer === undefined) {
      const timer = setTimeout(() => {
        this.#timer = undefined;
        this.#drain();
      }, Math.min(this.#flushSecs * 1000, 2 ** 31 - 1)); // longer overflows to at once
      // A forgotten writer must not keep the program alive (PyTorch's thread is a daemon).
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
  }

  // Written at once, not by an async write: a Deno.exit while one was under way lost its events.
  #drain(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const chunk = concat(this.#pending);
    this.#pending = [];
    try {
      for (let off = 0; off < chunk.length;) off += this.#file.writeSync(chunk.subarray(off));
    } catch (e) {
      this.#error ??= e;
    }
  }

  // deno-lint-ignore require-await
  async flush(): Promise<void> {
    this.#drain();
    if (this.#error !== undefined) {
      const e = this.#error;
      this.#error = undefined;
      throw e;
    }
  }

  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      this.#closed = true;
      globalThis.removeEventListener?.("unload", this.#atExit);
      this.#file.close();
    }
  }
}

// A read awaited later in the event chain: handled now, so that a failure is
// reported by flush()/close() rather than as an unhandled rejection.
function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

function checkTag(method: string, tag: unknown, what = "tag"): string {
  if (typeof tag !== "string") {
    throw new TypeError(`SummaryWriter.${method}: ${what} must be a string, got ${describe(tag)}`);
  }
  return tag;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (v instanceof Tensor) return `a tensor of shape [${v.shape.join(", ")}]`;
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `${typeof v} ${String(v)}`;
}

// Python's int(step): truncated toward zero; NaN and infinities are errors.
function checkStep(
  method: string,
  step: number | undefined | null,
  what = "globalStep",
): number | undefined {
  if (step === undefined || step === null) return undefined;
  if (typeof step !== "number" || !Number.isFinite(step) || Math.abs(step) >= 2 ** 63) {
    throw new RangeError(
      `SummaryWriter.${method}: ${what} must be a finite number (an int64), got ${describe(step)}`,
    );
  }
  return Math.trunc(step);
}

function checkWalltime(method: string, walltime: number | undefined | null): number {
  if (walltime === undefined || walltime === null) return now();
  if (typeof walltime !== "number" || !Number.isFinite(walltime)) {
    throw new RangeError(
      `SummaryWriter.${method}: walltime must be a finite number of seconds, got ${
        describe(walltime)
      }`,
    );
  }
  return walltime;
}

// A scalar's value, read without blocking: the read is queued at the call, so
// later in-place changes of the tensor do not show.
function scalarOf(method: string, value: unknown, what = "value"): number | Promise<number> {
  if (typeof value === "number") return value;
  if (value instanceof Tensor) {
    if (value.numel() !== 1) {
      throw new RangeError(
        `SummaryWriter.${method}: ${what} must hold one element, got a tensor of shape [${
          value.shape.join(", ")
        }] (${value.numel()} elements) on ${value.device}`,
      );
    }
    return quiet(value.data().then((d) => Number(d[0])));
  }
  throw new TypeError(
    `SummaryWriter.${method}: ${what} must be a number or a one-element tensor, got ${
      describe(value)
    }`,
  );
}

// A chart of addCustomScalars' layout: its type, then its tags (three for a margin chart).
function checkChart(where: string, chart: unknown): asserts chart is CustomScalarChart {
  const ok = Array.isArray(chart) && chart.length === 2 && Array.isArray(chart[1]) &&
    chart[1].every((t) => typeof t === "string") &&
    (chart[0] === "Multiline" || (chart[0] === "Margin" && chart[1].length === 3));
  if (!ok) {
    throw new TypeError(
      `SummaryWriter.addCustomScalars: ${where} must be ["Multiline", [tags...]] or ["Margin", [value, lower, upper]], got ${
        Array.isArray(chart) ? JSON.stringify(chart) : describe(chart)
      }`,
    );
  }
}

/**
 * Writes TensorBoard event files, as `torch.utils.tensorboard.SummaryWriter`
 * (PyTorch 1.13): the same directory and file names, and for the same values,
 * steps and walltimes the same bytes (TFRecords of `Event` protobufs).
 *
 * Tensor values (any device) are read without blocking: `addScalar(tag,
 * loss)` queues the read and returns, and events reach the file in the order
 * of the calls. Events are written when `maxQueue` are pending, after
 * `flushSecs`, or on `flush()` / `close()`, which resolve when the bytes are
 * in the file, and when the program ends (also by `Deno.exit`) those still
 * pending of a writer never closed (PyTorch's daemon thread loses them); an
 * event still waiting for its tensor's read then (a `Deno.exit` right after
 * the call, with no `await` between) is lost, with those called after it.
 *
 * Deliberate differences from PyTorch: a call after `close()` is an error
 * (PyTorch silently opens a new event file); a histogram of values with NaN or
 * infinity is an error (PyTorch writes a NaN/inf minimum TensorBoard cannot
 * show); an error found while reading a tensor (such as non-finite histogram
 * values) rejects the next `flush()` or `close()` (with the first such error;
 * the other events are still written). The sum of squares of a
 * histogram is summed in order, where PyTorch uses the BLAS dot, which may
 * differ in the last bits. Of numpy's bin estimators, `"stone"` is not
 * supported.
 *
 * ```ts
 * const writer = new utils.tensorboard.SummaryWriter({ logDir: "runs/exp1" });
 * for (let step = 0; step < 100; step++) writer.addScalar("loss", lossTensor, step);
 * await writer.close();
 * ```
 */
export class SummaryWriter {
  /** The directory the event files go to. */
  readonly logDir: string;
  #maxQueue: number;
  #flushSecs: number;
  #suffix: string;
  #fileWriter: EventFileWriter;
  #allWriters = new Map<string, EventFileWriter>();
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;
  #error: unknown = undefined;
  #closed = false;
  #embeddings: EmbeddingInfo[] = [];

  /** Creates the log directory and the first event file at once. */
  constructor(options: SummaryWriterOptions = {}) {
    needDeno();
    const { comment = "", purgeStep, maxQueue = 10, flushSecs = 120, filenameSuffix = "" } =
      options;
    if (!Number.isInteger(maxQueue) || maxQueue < 1) {
      throw new RangeError(`SummaryWriter: maxQueue must be a positive integer, got ${maxQueue}`);
    }
    if (typeof flushSecs !== "number" || !(flushSecs >= 0)) {
      throw new RangeError(`SummaryWriter: flushSecs must be a number >= 0, got ${flushSecs}`);
    }
    const step = checkStep("constructor", purgeStep, "purgeStep");
    this.logDir = options.logDir ? String(options.logDir) : defaultLogDir(comment);
    this.#maxQueue = maxQueue;
    this.#flushSecs = flushSecs;
    this.#suffix = filenameSuffix;
    this.#fileWriter = this.#newFileWriter(this.logDir);
    this.#allWriters.set(this.logDir, this.#fileWriter);
    if (step !== undefined) {
      const t = now();
      this.#fileWriter.add(encodeEvent(t, step, { fileVersion: "brain.Event:2" }));
      this.#fileWriter.add(encodeEvent(t, step, { sessionLogStart: true }));
    }
  }

  #newFileWriter(dir: string): EventFileWriter {
    return new EventFileWriter(dir, this.#maxQueue, this.#flushSecs, this.#suffix);
  }

  // Events go out in call order even when some wait for a tensor read. One whose value is
  // known, with nothing waiting before it, goes to its file writer at once: queued behind a
  // promise, a Deno.exit right after the call lost it.
  #enqueue<T>(value: T | Promise<T>, write: (value: T) => void): void {
    if (!(value instanceof Promise) && this.#waiting === 0) {
      try {
        write(value);
      } catch (e) {
        this.#error ??= e;
      }
      return;
    }
    this.#chain(async () => write(await value));
  }

  #chain(task: () => Promise<void>): void {
    this.#waiting++;
    this.#tail = this.#tail.then(task).catch((e) => {
      this.#error ??= e;
    }).finally(() => this.#waiting--);
  }

  /** The directory the event files go to. */
  getLogdir(): string {
    return this.logDir;
  }

  /** The path of the main event file (the one `addScalar` writes to). */
  get eventFile(): string {
    return this.#fileWriter.path;
  }

  #open(method: string): void {
    if (this.#closed) {
      throw new Error(`SummaryWriter.${method}: the writer of ${this.logDir} is closed`);
    }
  }

  /** `add_scalar(tag, scalar_value, global_step, walltime)`: a `simple_value` (float32). */
  addScalar(
    tag: string,
    value: number | Tensor,
    globalStep?: number,
    walltime?: number,
  ): void {
    this.#open("addScalar");
    checkTag("addScalar", tag);
    const step = checkStep("addScalar", globalStep);
    const time = checkWalltime("addScalar", walltime);
    const v = scalarOf("addScalar", value);
    const fw = this.#fileWriter;
    this.#enqueue(v, (x) => fw.add(encodeEvent(time, step, { summaryValue: scalarValue(tag, x) })));
  }

  /**
   * `add_scalars(main_tag, tag_scalar_dict, global_step, walltime)`: each
   * value goes, under `mainTag`, to its own event file in the sub-directory
   * `<logDir>/<mainTag with "/" as "_">_<tag>`, so TensorBoard draws them as
   * runs on one chart.
   */
  addScalars(
    mainTag: string,
    tagScalarDict: Record<string, number | Tensor>,
    globalStep?: number,
    walltime?: number,
  ): void {
    this.#open("addScalars");
    checkTag("addScalars", mainTag, "mainTag");
    if (
      typeof tagScalarDict !== "object" || tagScalarDict === null || Array.isArray(tagScalarDict)
    ) {
      throw new TypeError(
        `SummaryWriter.addScalars: tagScalarDict must be an object of values, got ${
          describe(tagScalarDict)
        }`,
      );
    }
    const step = checkStep("addScalars", globalStep);
    const time = checkWalltime("addScalars", walltime);
    const entries = Object.entries(tagScalarDict).map(([tag, value]) =>
      [tag, scalarOf("addScalars", value, `tagScalarDict.${tag}`)] as const
    );
    for (const [tag, v] of entries) {
      const dir = `${this.#fileWriter.logDir}/${mainTag.replaceAll("/", "_")}_${tag}`;
      let fw = this.#allWriters.get(dir);
      if (!fw) this.#allWriters.set(dir, fw = this.#newFileWriter(dir));
      const target = fw;
      this.#enqueue(
        v,
        (x) => target.add(encodeEvent(time, step, { summaryValue: scalarValue(mainTag, x) })),
      );
    }
  }

  /**
   * `add_histogram(tag, values, global_step, bins, walltime, max_bins)`:
   * a `HistogramProto` of the values (a tensor on any device, or numbers)
   * over PyTorch's default 'tensorflow' bins, the given edges, or a count of
   * equal bins (np.histogram's).
   */
  addHistogram(
    tag: string,
    values: Tensor | ArrayLike<number>,
    globalStep?: number,
    options: HistogramOptions = {},
  ): void {
    this.#open("addHistogram");
    checkTag("addHistogram", tag);
    const step = checkStep("addHistogram", globalStep);
    const time = checkWalltime("addHistogram", options.walltime);
    const { bins = "tensorflow", maxBins } = options;
    let edges: ArrayLike<number> | number | BinRule;
    if (bins === "tensorflow") edges = defaultBins();
    else if ((BIN_RULES as readonly unknown[]).includes(bins)) edges = bins as BinRule;
    else if (typeof bins === "number") {
      if (!Number.isInteger(bins) || bins < 1) {
        throw new RangeError(
          `SummaryWriter.addHistogram: a count of bins must be a positive integer, got ${bins}`,
        );
      }
      edges = bins;
    } else if (Array.isArray(bins)) {
      if (bins.length < 2 || bins.some((b) => typeof b !== "number" || !Number.isFinite(b))) {
        throw new RangeError(
          `SummaryWriter.addHistogram: bins must be at least two finite edges, got [${bins}]`,
        );
      }
      if (bins.some((b, i) => i > 0 && bins[i - 1] > b)) {
        throw new RangeError(
          `SummaryWriter.addHistogram: bins must increase monotonically, got [${bins}]`,
        );
      }
      edges = bins;
    } else {
      throw new TypeError(
        `SummaryWriter.addHistogram: bins must be "tensorflow", one of ${
          BIN_RULES.map((r) => `"${r}"`).join(", ")
        }, a count or an array of edges, got ${describe(bins)}`,
      );
    }
    if (maxBins !== undefined && (!Number.isInteger(maxBins) || maxBins < 1)) {
      throw new RangeError(
        `SummaryWriter.addHistogram: maxBins must be a positive integer, got ${maxBins}`,
      );
    }
    let read: Promise<ArrayLike<number>> | ArrayLike<number>;
    if (values instanceof Tensor) {
      if (values.numel() === 0) {
        throw new RangeError(
          `SummaryWriter.addHistogram: the tensor of shape [${
            values.shape.join(", ")
          }] on ${values.device} has no element`,
        );
      }
      read = quiet(values.data());
    } else if (values !== null && typeof values === "object" && typeof values.length === "number") {
      if (values.length === 0) {
        throw new RangeError("SummaryWriter.addHistogram: values has no element");
      }
      read = Float64Array.from(values);
    } else {
      throw new TypeError(
        `SummaryWriter.addHistogram: values must be a tensor or an array of numbers, got ${
          describe(values)
        }`,
      );
    }
    const fw = this.#fileWriter;
    this.#enqueue(read, (values) => {
      const data = Float64Array.from(values);
      const bad = data.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) {
        throw new RangeError(
          `SummaryWriter.addHistogram(${
            JSON.stringify(tag)
          }): values must be finite, element ${bad} is ${data[bad]}`,
        );
      }
      const h = makeHistogram(
        data,
        typeof edges === "number"
          ? uniformEdges(data, edges)
          : typeof edges === "string"
          ? ruleEdges(data, edges)
          : edges,
        maxBins,
      );
      fw.add(encodeEvent(time, step, { summaryValue: histogramValue(tag, h) }));
    });
  }

  /**
   * `add_image(tag, img_tensor, global_step, walltime, dataformats)`: an image from a tensor
   * on any device, float values in [0, 1] (each becomes `trunc(v · 255)`, clipped to 0 to 255,
   * as PyTorch 2 does; 1.13's cast wraps values outside), laid out as `dataformats` says
   * (default `"CHW"`; also `"HWC"`, `"HW"`): 1 channel is gray, 2 gray and alpha, 3 RGB, 4 RGBA. Written as a PNG,
   * as PyTorch's. multigrad has no uint8 dtype: pass bytes as a float tensor divided by 255.
   *
   * @example
   * ```ts
   * writer.addImage("sample", rand([3, 32, 32]), step); // CHW, values in [0, 1]
   * ```
   */
  addImage(tag: string, image: Tensor, globalStep?: number, options: ImageOptions = {}): void {
    this.#image("addImage", tag, image, globalStep, options, "CHW");
  }

  /**
   * `add_images(tag, img_tensor, global_step, walltime, dataformats)`: a batch of images
   * (default `"NCHW"`; also `"NHWC"`...) as one grid of up to 8 a row, gray (1 channel) or RGB
   * (3), as PyTorch 1.13's `make_grid`; values as in {@link SummaryWriter.addImage}.
   */
  addImages(tag: string, images: Tensor, globalStep?: number, options: ImageOptions = {}): void {
    this.#image("addImages", tag, images, globalStep, options, "NCHW");
  }

  #image(
    method: string,
    tag: string,
    image: Tensor,
    globalStep: number | undefined,
    options: ImageOptions,
    defaultFormat: string,
  ): void {
    this.#open(method);
    checkTag(method, tag);
    const step = checkStep(method, globalStep);
    const time = checkWalltime(method, options.walltime);
    if (!(image instanceof Tensor)) {
      throw new TypeError(
        `SummaryWriter.${method}: the image must be a tensor, got ${describe(image)}`,
      );
    }
    const shape = [...image.shape];
    const format = options.dataformats ?? defaultFormat;
    checkImage(shape, format, method); // at the call, not when the values come
    const fw = this.#fileWriter;
    // Compressed as soon as the values come (in parallel with earlier events); written in order.
    const value = quiet(
      image.data().then(async (values) => {
        const pixels = imagePixels(values, shape, format, method);
        const png = await encodePng(pixels);
        return imageValue(tag, pixels.height, pixels.width, pixels.channels, png);
      }),
    );
    this.#enqueue(value, (v) => fw.add(encodeEvent(time, step, { summaryValue: v })));
  }

  /**
   * `add_pr_curve(tag, labels, predictions, global_step, num_thresholds, weights, walltime)`:
   * the precision-recall curve of `predictions` (probabilities in [0, 1]; others are left out,
   * as PyTorch's binning does) against `labels` (1 true, 0 false), as PyTorch's
   * `compute_curve` makes it: true/false positives/negatives, precision and recall at
   * `numThresholds` thresholds. Tensors on any device or numbers. The predictions are bucketed
   * in their own precision, as numpy does for PyTorch: a float32 tensor's in float32, a float64
   * tensor's and plain numbers (like a numpy float64 array) in float64.
   *
   * @example
   * ```ts
   * writer.addPrCurve("pr", labels, model.forward(x).sigmoid().reshape([-1]), step);
   * ```
   */
  addPrCurve(
    tag: string,
    labels: Tensor | ArrayLike<number>,
    predictions: Tensor | ArrayLike<number>,
    globalStep?: number,
    options: PrCurveOptions = {},
  ): void {
    const method = "addPrCurve";
    this.#open(method);
    checkTag(method, tag);
    const step = checkStep(method, globalStep);
    const time = checkWalltime(method, options.walltime);
    const { numThresholds = 127, weights } = options;
    if (!Number.isInteger(numThresholds) || numThresholds < 2) {
      throw new RangeError(
        `SummaryWriter.addPrCurve: numThresholds must be an integer of at least 2, got ${numThresholds}`,
      );
    }
    const count = (v: unknown, what: string): number => {
      if (v instanceof Tensor) return v.numel();
      if (
        v !== null && typeof v === "object" && typeof (v as ArrayLike<number>).length === "number"
      ) {
        return (v as ArrayLike<number>).length;
      }
      throw new TypeError(
        `SummaryWriter.addPrCurve: ${what} must be a tensor or numbers, got ${describe(v)}`,
      );
    };
    const sizes = [count(labels, "labels"), count(predictions, "predictions")];
    if (weights !== undefined) sizes.push(count(weights, "weights"));
    if (sizes.some((n) => n !== sizes[0])) {
      throw new RangeError(
        `SummaryWriter.addPrCurve: labels, predictions${
          weights === undefined ? "" : " and weights"
        } must have as many elements, got ${sizes.join(", ")}`,
      );
    }
    const read = (v: Tensor | ArrayLike<number>) =>
      v instanceof Tensor ? quiet(v.data()) : Promise.resolve(Float64Array.from(v));
    const all = Promise.all([read(labels), read(predictions), weights && read(weights)]);
    const fw = this.#fileWriter;
    const thresholds = Math.min(numThresholds, 127);
    this.#enqueue(all, ([l, p, w]) => {
      const rows = prCurveRows(l, p, thresholds, w || undefined);
      fw.add(encodeEvent(time, step, { summaryValue: prCurveValue(tag, rows) }));
    });
  }

  /** `add_text(tag, text_string, global_step, walltime)`: shown under `<tag>/text_summary`. */
  addText(tag: string, text: string, globalStep?: number, walltime?: number): void {
    this.#open("addText");
    checkTag("addText", tag);
    checkTag("addText", text, "text");
    const step = checkStep("addText", globalStep);
    const time = checkWalltime("addText", walltime);
    const fw = this.#fileWriter;
    this.#enqueue(
      text,
      (x) => fw.add(encodeEvent(time, step, { summaryValue: textValue(tag, x) })),
    );
  }

  /**
   * `add_hparams(hparam_dict, metric_dict, hparam_domain_discrete, run_name)`:
   * a run in `<logDir>/<runName>` with the hyperparameters (numbers, strings,
   * booleans, one-element tensors; null skipped) and the metrics as scalars.
   * As in PyTorch 1.13 a boolean is logged as the number 1 or 0.
   */
  addHparams(
    hparamDict: Record<string, Hparam>,
    metricDict: Record<string, number | Tensor>,
    options: HparamsOptions = {},
  ): void {
    this.#open("addHparams");
    const isDict = (d: unknown) =>
      typeof d === "object" && d !== null && !Array.isArray(d) &&
      !(d instanceof Tensor);
    if (!isDict(hparamDict) || !isDict(metricDict)) {
      throw new TypeError(
        `SummaryWriter.addHparams: hparamDict and metricDict must be objects, got ${
          describe(hparamDict)
        } and ${describe(metricDict)}`,
      );
    }
    const discrete = options.hparamDomainDiscrete ?? {};
    for (const [k, list] of Object.entries(discrete)) {
      const v = hparamDict[k];
      if (
        !(k in hparamDict) || !Array.isArray(list) || list.some((d) => typeof d !== typeof v)
      ) {
        throw new TypeError(
          `SummaryWriter.addHparams: hparamDomainDiscrete.${k} must be an array of the type of hparamDict.${k} (${
            describe(v)
          })`,
        );
      }
    }
    const hparams: [string, number | string | Promise<number>, HparamValue[] | undefined][] = [];
    for (const [k, v] of Object.entries(hparamDict)) {
      if (v === null || v === undefined) continue;
      const domain = discrete[k]?.map((d) => typeof d === "boolean" ? Number(d) : d);
      if (typeof v === "number" || typeof v === "boolean") hparams.push([k, Number(v), domain]);
      else if (typeof v === "string") hparams.push([k, v, domain]);
      else if (v instanceof Tensor && v.numel() >= 1) {
        hparams.push([k, quiet(v.data().then((d) => Number(d[0]))), undefined]);
      } else {
        throw new TypeError(
          `SummaryWriter.addHparams: hparamDict.${k} must be a number, string, boolean or tensor, got ${
            describe(v)
          }`,
        );
      }
    }
    const metrics = Object.entries(metricDict).map(([k, v]) =>
      [k, scalarOf("addHparams", v, `metricDict.${k}`)] as const
    );
    const runName = options.runName || String(now());
    checkTag("addHparams", runName, "runName");
    const time = now();
    // PyTorch writes the run with SummaryWriter(log_dir=...): the default queue, flush and suffix.
    const fw = new EventFileWriter(joinPath(this.#fileWriter.logDir, runName), 10, 120, "");
    this.#chain(async () => {
      try {
        const read: [string, HparamValue, HparamValue[] | undefined][] = [];
        for (const [k, v, d] of hparams) read.push([k, await v, d]);
        const values = hparamsValues(read, metrics.map(([k]) => k));
        for (const value of values) fw.add(encodeEvent(time, undefined, { summaryValue: value }));
        for (const [k, v] of metrics) {
          fw.add(encodeEvent(time, undefined, { summaryValue: scalarValue(k, await v) }));
        }
      } finally {
        await fw.close();
      }
    });
  }

  /**
   * `add_audio(tag, snd_tensor, global_step, sample_rate, walltime)`: one channel of samples
   * (a tensor on any device of shape `[L]` or `[1, L]`, values in [-1, 1]; those outside are
   * clipped, as PyTorch does, which also warns) as a 16-bit PCM WAV file, the same bytes as
   * PyTorch's `summary.audio`: each sample `trunc(v · 32767)`, computed in float32 for a
   * float32 tensor. TensorBoard plays it in its Audio tab. A NaN sample is an error (PyTorch
   * casts it to an undefined int16).
   *
   * @example
   * ```ts
   * const t = arange(0, 16000).mul(2 * Math.PI * 440 / 16000).sin(); // 1 s of A4
   * writer.addAudio("tone", t, step, { sampleRate: 16000 });
   * ```
   */
  addAudio(
    tag: string,
    sndTensor: Tensor,
    globalStep?: number,
    options: AudioOptions = {},
    walltime?: number,
  ): void {
    const method = "addAudio";
    this.#open(method);
    checkTag(method, tag);
    const step = checkStep(method, globalStep);
    const time = checkWalltime(method, walltime);
    const { sampleRate = 44100 } = options;
    if (
      typeof sampleRate !== "number" || !(sampleRate > 0) ||
      !(wavFrameRate(sampleRate) <= 2 ** 31 - 1)
    ) {
      throw new RangeError(
        `SummaryWriter.addAudio: sampleRate must be a number of samples a second above 0 and below 2^31 (a WAV header holds twice it as a uint32), got ${
          describe(sampleRate)
        }`,
      );
    }
    if (!(sndTensor instanceof Tensor)) {
      throw new TypeError(
        `SummaryWriter.addAudio: sndTensor must be a tensor, got ${describe(sndTensor)}`,
      );
    }
    // PyTorch squeezes the array and then needs one dimension left.
    const shape = [...sndTensor.shape];
    const lengths = shape.filter((d) => d !== 1);
    if (lengths.length !== 1 || lengths[0] === 0) {
      throw new RangeError(
        `SummaryWriter.addAudio: sndTensor must be one channel of at least 2 samples, shape [L] or [1, L], got shape [${
          shape.join(", ")
        }]`,
      );
    }
    const length = lengths[0];
    const float32 = sndTensor.dtype === "float32";
    const fw = this.#fileWriter;
    const value = quiet(
      sndTensor.data().then((samples) => {
        for (let i = 0; i < samples.length; i++) {
          if (Number.isNaN(samples[i])) {
            throw new RangeError(
              `SummaryWriter.addAudio(${
                JSON.stringify(tag)
              }): sample ${i} of the tensor of shape [${shape.join(", ")}] is NaN`,
            );
          }
        }
        return audioValue(tag, sampleRate, length, encodeWav(samples, sampleRate, float32));
      }),
    );
    this.#enqueue(value, (v) => fw.add(encodeEvent(time, step, { summaryValue: v })));
  }

  /**
   * `add_embedding(mat, metadata, label_img, global_step, tag, metadata_header)`: the data
   * points of `mat` (`[N, D]`, a tensor on any device) for TensorBoard's Projector, written as
   * PyTorch writes them under the log directory: `<globalStep as 5 digits>/<tag>/tensors.tsv`
   * (numbers as Python's `str()`: the same text), `metadata.tsv` for `metadata`, `sprite.png`
   * for `labelImg`, and `projector_config.pbtxt` listing every embedding this writer added. The
   * directory is made at the call (an error if a file has its name; a warning if it exists,
   * as in PyTorch); the files are written once the tensors are read, by `flush()` / `close()`
   * at the latest. `%`, `/` and `\` of the tag are written `%25`, `%2f`, `%5c` in the path.
   *
   * Differences from PyTorch: the arguments are checked before anything is written;
   * multi-column metadata needs `metadataHeader`, and each row as many columns (PyTorch
   * writes a Python list's repr, and checks the first row only).
   *
   * @example
   * ```ts
   * writer.addEmbedding(features, { metadata: labels, labelImg: images, globalStep: epoch });
   * ```
   */
  addEmbedding(mat: Tensor, options: EmbeddingOptions = {}): void {
    const method = "addEmbedding";
    this.#open(method);
    if (!(mat instanceof Tensor) || mat.shape.length !== 2) {
      throw new RangeError(
        `SummaryWriter.addEmbedding: mat must be a 2-d tensor [N, D] (a row per data point), got ${
          describe(mat)
        }`,
      );
    }
    const [rows, columns] = mat.shape;
    const tag = checkTag(method, options.tag ?? "default");
    const globalStep = options.globalStep ?? 0;
    if (!Number.isSafeInteger(globalStep)) {
      throw new RangeError(
        `SummaryWriter.addEmbedding: globalStep must be an integer, got ${describe(globalStep)}`,
      );
    }
    const { metadata, labelImg } = options;
    // PyTorch's `if not metadata_header`: an empty header is none.
    const header = options.metadataHeader?.length ? options.metadataHeader : undefined;
    let metadataText: string | undefined;
    if (metadata !== undefined && metadata !== null) {
      if (!Array.isArray(metadata) || metadata.length !== rows) {
        throw new RangeError(
          `SummaryWriter.addEmbedding: metadata must be an array of a label per data point (${rows}, mat of shape [${
            mat.shape.join(", ")
          }]), got ${Array.isArray(metadata) ? `${metadata.length} labels` : describe(metadata)}`,
        );
      }
      const isValue = (v: unknown) => ["string", "number", "boolean"].includes(typeof v);
      metadata.forEach((row, i) => {
        const fits = header
          ? Array.isArray(row) && row.length === header.length && row.every(isValue)
          : isValue(row);
        if (!fits) {
          throw new TypeError(
            `SummaryWriter.addEmbedding: metadata[${i}] must be ${
              header
                ? `an array of ${header.length} strings, numbers or booleans (one per metadataHeader column)`
                : "a string, number or boolean (give metadataHeader for several columns)"
            }, got ${describe(row)}`,
          );
        }
      });
      if (header && !header.every(isValue)) {
        throw new TypeError(
          "SummaryWriter.addEmbedding: metadataHeader must hold strings, numbers or booleans",
        );
      }
      metadataText = metadataTsv(metadata, header);
    }
    let imageShape: number[] | undefined;
    if (labelImg !== undefined && labelImg !== null) {
      const shape = labelImg instanceof Tensor ? [...labelImg.shape] : [];
      const [n, c, h, w] = shape;
      if (shape.length !== 4 || n !== rows || (c !== 1 && c !== 3) || !(h >= 1 && w >= 1)) {
        throw new RangeError(
          `SummaryWriter.addEmbedding: labelImg must be a tensor [N, C, H, W] of an image per data point (N ${rows}, C 1 or 3, H and W at least 1), got ${
            describe(labelImg)
          }`,
        );
      }
      const { gridHeight, side } = spriteSize(n, h, w);
      if (gridHeight > side) {
        throw new RangeError(
          `SummaryWriter.addEmbedding: the sprite of labelImg of shape [${
            shape.join(", ")
          }] does not fit its square: ${
            Math.ceil(Math.sqrt(n))
          } images a row are ${side} pixels wide, the rows ${gridHeight} high (PyTorch fails too)`,
        );
      }
      imageShape = shape;
    }
    const subdir = `${zfill5(globalStep)}/${encodeTag(tag)}`;
    const savePath = joinPath(this.#fileWriter.logDir, subdir);
    let existing: Deno.FileInfo | undefined;
    try {
      existing = Deno.statSync(savePath);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    if (existing === undefined) Deno.mkdirSync(savePath, { recursive: true });
    else if (!existing.isDirectory) {
      throw new Error(
        `SummaryWriter.addEmbedding: ${savePath} exists, but is a file: cannot write the embedding there`,
      );
    } else {
      console.warn(
        `SummaryWriter.addEmbedding: ${savePath} exists already (was globalStep set?); its files are replaced`,
      );
    }
    const info: EmbeddingInfo = {
      tensorName: `${tag}:${zfill5(globalStep)}`,
      tensorPath: joinPath(subdir, "tensors.tsv"),
      metadataPath: metadataText === undefined ? undefined : joinPath(subdir, "metadata.tsv"),
      spritePath: imageShape && joinPath(subdir, "sprite.png"),
      singleImageDim: imageShape && [imageShape[3], imageShape[2]],
    };
    const floats = isFloat(mat.dtype);
    const files = quiet(
      Promise.all([mat.data(), labelImg && imageShape ? labelImg.data() : undefined]).then(
        async ([values, images]) => ({
          tensors: tensorsTsv(values, rows, columns, floats),
          sprite: images && imageShape && await encodePng(spritePixels(images, imageShape)),
        }),
      ),
    );
    const logDir = this.#fileWriter.logDir;
    const utf8 = new TextEncoder();
    this.#enqueue(files, ({ tensors, sprite }) => {
      if (metadataText !== undefined) {
        Deno.writeFileSync(joinPath(savePath, "metadata.tsv"), utf8.encode(metadataText));
      }
      if (sprite) Deno.writeFileSync(joinPath(savePath, "sprite.png"), sprite);
      Deno.writeFileSync(joinPath(savePath, "tensors.tsv"), utf8.encode(tensors));
      // PyTorch rewrites the whole config, every embedding so far, at each call.
      this.#embeddings.push(info);
      Deno.writeFileSync(
        joinPath(logDir, "projector_config.pbtxt"),
        utf8.encode(projectorPbtxt(this.#embeddings)),
      );
    });
  }

  /**
   * `add_custom_scalars(layout)`: charts of the Custom Scalars tab that gather scalars
   * written with {@link SummaryWriter.addScalar}, as
   * `{category: {title: ["Multiline", tags] | ["Margin", [value, lower, upper]]}}`, in the
   * objects' key order (JavaScript lists integer-like keys first). The same bytes as PyTorch's
   * `custom_scalars()`; TensorBoard reads the run's last layout. Unlike PyTorch, which draws any
   * type but `"Margin"` as lines, another chart type is an error.
   *
   * @example
   * ```ts
   * writer.addCustomScalars({
   *   losses: { "train vs val": ["Multiline", ["loss/train", "loss/val"]] },
   *   accuracy: { "with bounds": ["Margin", ["acc/mean", "acc/low", "acc/high"]] },
   * });
   * ```
   */
  addCustomScalars(layout: CustomScalarLayout): void {
    const method = "addCustomScalars";
    this.#open(method);
    const isObject = (v: unknown) =>
      typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Tensor);
    if (!isObject(layout)) {
      throw new TypeError(
        `SummaryWriter.addCustomScalars: layout must be an object of categories, got ${
          describe(layout)
        }`,
      );
    }
    for (const [category, charts] of Object.entries(layout)) {
      const where = `layout[${JSON.stringify(category)}]`;
      if (!isObject(charts)) {
        throw new TypeError(
          `SummaryWriter.addCustomScalars: ${where} must be an object of charts, got ${
            describe(charts)
          }`,
        );
      }
      for (const [title, chart] of Object.entries(charts)) {
        checkChart(`${where}[${JSON.stringify(title)}]`, chart);
      }
    }
    const value = customScalarsValue(layout);
    const time = now();
    const fw = this.#fileWriter;
    this.#enqueue(value, (v) => fw.add(encodeEvent(time, undefined, { summaryValue: v })));
  }

  /**
   * `add_custom_scalars_multilinechart(tags, category, title)`: {@link
   * SummaryWriter.addCustomScalars} of one chart drawing the scalars of `tags` as lines.
   */
  addCustomScalarsMultilinechart(tags: string[], options: CustomScalarChartOptions = {}): void {
    const { category = "default", title = "untitled" } = options;
    this.addCustomScalars({ [category]: { [title]: ["Multiline", tags] } });
  }

  /**
   * `add_custom_scalars_marginchart(tags, category, title)`: {@link
   * SummaryWriter.addCustomScalars} of one chart drawing the scalar `tags[0]` between the
   * scalars `tags[1]` (lower) and `tags[2]` (upper).
   */
  addCustomScalarsMarginchart(
    tags: [string, string, string],
    options: CustomScalarChartOptions = {},
  ): void {
    const { category = "default", title = "untitled" } = options;
    this.addCustomScalars({ [category]: { [title]: ["Margin", tags] } });
  }

  /** Writes every pending event; resolves when they are in the files. */
  async flush(): Promise<void> {
    await this.#tail;
    await Promise.all([...this.#allWriters.values()].map((w) => w.flush()));
    this.#rethrow();
  }

  #rethrow(): void {
    if (this.#error !== undefined) {
      const e = this.#error;
      this.#error = undefined;
      throw e;
    }
  }

  /** Writes every pending event and closes the files; later calls are errors (closing twice is not). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#tail;
    const results = await Promise.allSettled([...this.#allWriters.values()].map((w) => w.close()));
    this.#rethrow();
    for (const r of results) if (r.status === "rejected") throw r.reason;
  }
}
