/**
 * The demo's training curves as a standalone SVG, drawn by hand: the train
 * loss of every step (log scale) over the per-epoch mean, and train and
 * test accuracy per epoch, with axes, ticks, labels and legends.
 * @module
 */

/** What one finished epoch measured. Epoch 0 is the untrained model. */
export interface EpochRecord {
  /** Epochs completed (0: before training). */
  epoch: number;
  /** Mean train loss over the epoch's steps (NaN for epoch 0). */
  trainLoss: number;
  /** Accuracy on the train split, in [0, 1]. */
  trainAccuracy: number;
  /** Accuracy on the held-out test split, in [0, 1]. */
  testAccuracy: number;
  /** Wall-clock seconds the epoch took (0 for epoch 0). */
  seconds: number;
}

/** A run's measurements so far. */
export interface History {
  /** Optimizer steps in one epoch (sets the x position of each step). */
  stepsPerEpoch: number;
  /** The train loss of every step, in order. */
  stepLoss: number[];
  /** One record per evaluated epoch, in order, starting with epoch 0. */
  epochs: EpochRecord[];
}

/** Options of {@link renderPlot}. */
export interface PlotOptions {
  /** The heading (default "multigrad demo: training curves"). */
  title?: string;
  /** A second, smaller line under the heading (devices, settings). */
  subtitle?: string;
  /** Width in pixels (default 860). */
  width?: number;
  /** Height in pixels (default 640). */
  height?: number;
  /** Number of classes, for the chance line (default 3). */
  classes?: number;
}

/** A tick of an axis: its value and its label (null for an unlabelled minor tick). */
export interface Tick {
  /** Where the tick is, in data units. */
  readonly value: number;
  /** The text under or beside it, or null. */
  readonly label: string | null;
}

interface Rect {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

const COLORS = {
  stepLoss: "#9ecae1",
  epochLoss: "#08519c",
  trainAccuracy: "#fd8d3c",
  testAccuracy: "#a63603",
  grid: "#e5e5e5",
  axis: "#333333",
  text: "#222222",
  chance: "#999999",
};

/** Escapes text for SVG content and attributes. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A compact label for a tick value: `0.5`, `20`, `1e-3`. */
export function formatTick(value: number): string {
  if (value === 0) return "0";
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5 || magnitude < 1e-3) {
    const [mantissa, exponent] = value.toExponential().split("e");
    return `${Number(mantissa).toString()}e${Number(exponent)}`;
  }
  return Number(value.toPrecision(6)).toString();
}

/**
 * About `count` evenly spaced round values (steps of 1, 2 or 5 times a power
 * of ten) covering `[min, max]`.
 */
export function linearTicks(min: number, max: number, count = 6): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (max <= min) return [min];
  const raw = (max - min) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const ticks: number[] = [];
  const first = Math.ceil(min / step - 1e-9);
  for (let i = first; i * step <= max + step * 1e-9; i++) {
    ticks.push(Number((i * step).toPrecision(12)));
  }
  return ticks;
}

/**
 * Ticks for a log axis over `[min, max]` (both > 0): every power of ten,
 * plus 2x and 5x of each when the range spans few decades; labels on the
 * powers of ten (and on 2x and 5x when there are few of those).
 */
export function logTicks(min: number, max: number): Tick[] {
  if (!(min > 0) || !(max > min)) return [];
  const low = Math.floor(Math.log10(min));
  const high = Math.ceil(Math.log10(max));
  const decades = high - low;
  const multiples = decades <= 3 ? [1, 2, 5] : [1];
  const ticks: Tick[] = [];
  for (let e = low; e <= high; e++) {
    for (const m of multiples) {
      const value = Number((m * 10 ** e).toPrecision(12));
      if (value < min * (1 - 1e-9) || value > max * (1 + 1e-9)) continue;
      ticks.push({ value, label: m === 1 || decades <= 1 ? formatTick(value) : null });
    }
  }
  if (ticks.filter((t) => t.label !== null).length < 2) {
    return ticks.map((t) => ({ value: t.value, label: formatTick(t.value) }));
  }
  return ticks;
}

/** Averages `values` into at most `maxPoints` buckets, keeping [index, mean] pairs. */
export function downsample(values: readonly number[], maxPoints: number): [number, number][] {
  const out: [number, number][] = [];
  if (values.length <= maxPoints) {
    values.forEach((v, i) => {
      if (Number.isFinite(v)) out.push([i, v]);
    });
    return out;
  }
  const bucket = values.length / maxPoints;
  for (let b = 0; b < maxPoints; b++) {
    const start = Math.floor(b * bucket);
    const end = Math.floor((b + 1) * bucket);
    let sum = 0;
    let n = 0;
    for (let i = start; i < end; i++) {
      if (Number.isFinite(values[i])) {
        sum += values[i];
        n++;
      }
    }
    if (n > 0) out.push([(start + end - 1) / 2, sum / n]);
  }
  return out;
}

function fmt(v: number): string {
  return Number(v.toFixed(2)).toString();
}

function text(
  x: number,
  y: number,
  content: string,
  attrs: Record<string, string | number> = {},
): string {
  const extra = Object.entries(attrs).map(([k, v]) => ` ${k}="${escapeXml(String(v))}"`).join("");
  return `<text x="${fmt(x)}" y="${fmt(y)}"${extra}>${escapeXml(content)}</text>`;
}

function polyline(points: [number, number][], attrs: string): string {
  if (points.length === 0) return "";
  const d = points.map(([x, y]) => `${fmt(x)},${fmt(y)}`).join(" ");
  return `<polyline fill="none" points="${d}" ${attrs}/>`;
}

function markers(points: [number, number][], color: string, radius = 3): string {
  return points
    .map(([x, y]) =>
      `<circle cx="${fmt(x)}" cy="${
        fmt(y)
      }" r="${radius}" fill="${color}" stroke="white" stroke-width="1"/>`
    )
    .join("");
}

function legend(
  area: Rect,
  entries: { label: string; color: string; dash?: string; width?: number }[],
): string {
  const rowHeight = 18;
  const width = 14 + 26 + Math.max(...entries.map((e) => e.label.length)) * 6.6;
  const x = area.x + area.width - width - 8;
  const y = area.y + 8;
  const parts = [
    `<rect x="${fmt(x)}" y="${fmt(y)}" width="${fmt(width)}" height="${
      entries.length * rowHeight + 8
    }" fill="white" fill-opacity="0.85" stroke="#cccccc"/>`,
  ];
  entries.forEach((e, i) => {
    const cy = y + 4 + rowHeight * i + rowHeight / 2;
    parts.push(
      `<line x1="${fmt(x + 8)}" y1="${fmt(cy)}" x2="${fmt(x + 30)}" y2="${
        fmt(cy)
      }" stroke="${e.color}" stroke-width="${e.width ?? 2}"${
        e.dash ? ` stroke-dasharray="${e.dash}"` : ""
      }/>`,
      text(x + 36, cy + 4, e.label, { "font-size": 12 }),
    );
  });
  return parts.join("");
}

interface Axes {
  readonly area: Rect;
  readonly xMax: number;
  readonly xTicks: number[];
  readonly yTicks: Tick[];
  readonly xToPx: (x: number) => number;
  readonly yToPx: (y: number) => number;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly title: string;
}

function drawAxes(a: Axes): string {
  const { area } = a;
  const parts: string[] = [];
  parts.push(
    `<rect x="${fmt(area.x)}" y="${fmt(area.y)}" width="${fmt(area.width)}" height="${
      fmt(area.height)
    }" fill="white" stroke="none"/>`,
  );
  for (const t of a.yTicks) {
    const y = a.yToPx(t.value);
    parts.push(
      `<line x1="${fmt(area.x)}" y1="${fmt(y)}" x2="${fmt(area.x + area.width)}" y2="${
        fmt(y)
      }" stroke="${COLORS.grid}"/>`,
      `<line x1="${fmt(area.x - (t.label ? 6 : 3))}" y1="${fmt(y)}" x2="${fmt(area.x)}" y2="${
        fmt(y)
      }" stroke="${COLORS.axis}"/>`,
    );
    if (t.label) {
      parts.push(text(area.x - 9, y + 4, t.label, { "text-anchor": "end", "font-size": 11 }));
    }
  }
  for (const value of a.xTicks) {
    const x = a.xToPx(value);
    const bottom = area.y + area.height;
    parts.push(
      `<line x1="${fmt(x)}" y1="${fmt(area.y)}" x2="${fmt(x)}" y2="${
        fmt(bottom)
      }" stroke="${COLORS.grid}"/>`,
      `<line x1="${fmt(x)}" y1="${fmt(bottom)}" x2="${fmt(x)}" y2="${
        fmt(bottom + 6)
      }" stroke="${COLORS.axis}"/>`,
      text(x, bottom + 19, formatTick(value), { "text-anchor": "middle", "font-size": 11 }),
    );
  }
  parts.push(
    `<rect x="${fmt(area.x)}" y="${fmt(area.y)}" width="${fmt(area.width)}" height="${
      fmt(area.height)
    }" fill="none" stroke="${COLORS.axis}"/>`,
    text(area.x + area.width / 2, area.y + area.height + 38, a.xLabel, {
      "text-anchor": "middle",
      "font-size": 12,
    }),
    text(area.x - 52, area.y + area.height / 2, a.yLabel, {
      "text-anchor": "middle",
      "font-size": 12,
      transform: `rotate(-90 ${fmt(area.x - 52)} ${fmt(area.y + area.height / 2)})`,
    }),
    text(area.x, area.y - 8, a.title, { "font-size": 13, "font-weight": "bold" }),
  );
  return parts.join("\n");
}

/**
 * The loss and accuracy curves of `history` as an SVG document (a string):
 * top, the train loss of each step (light) and each epoch's mean (dark,
 * with markers) on a log scale; bottom, train and test accuracy per epoch
 * with the chance level. The x axis of both is the epoch.
 */
export function renderPlot(history: History, options: PlotOptions = {}): string {
  const width = options.width ?? 860;
  const height = options.height ?? 640;
  const title = options.title ?? "multigrad demo: training curves";
  const left = 78;
  const right = 24;
  const top = options.subtitle ? 74 : 56;
  const gap = 70;
  const bottom = 56;
  const panelHeight = (height - top - bottom - gap) / 2;
  const lossArea: Rect = { x: left, y: top, width: width - left - right, height: panelHeight };
  const accArea: Rect = {
    x: left,
    y: top + panelHeight + gap,
    width: width - left - right,
    height: panelHeight,
  };

  const perEpoch = Math.max(1, history.stepsPerEpoch);
  const lastEpoch = history.epochs.at(-1)?.epoch ?? 0;
  const xMax = Math.max(1, lastEpoch, history.stepLoss.length / perEpoch);
  const xTicks = linearTicks(0, xMax, Math.min(10, Math.max(1, Math.ceil(xMax))))
    .filter((t) => Number.isInteger(t) || xMax < 4);
  const xToPx = (area: Rect) => (x: number) => area.x + (x / xMax) * area.width;

  // Loss panel (log scale).
  const epochLoss = history.epochs.filter((e) => e.epoch > 0 && Number.isFinite(e.trainLoss));
  const lossValues = [...history.stepLoss, ...epochLoss.map((e) => e.trainLoss)]
    .filter((v) => Number.isFinite(v) && v > 0);
  let lossMin = lossValues.length ? Math.min(...lossValues) : 0.1;
  let lossMax = lossValues.length ? Math.max(...lossValues) : 1;
  if (lossMax / lossMin < 10) {
    const mid = Math.sqrt(lossMax * lossMin);
    lossMin = Math.min(lossMin, mid / Math.sqrt(10));
    lossMax = Math.max(lossMax, mid * Math.sqrt(10));
  }
  const logMin = Math.log10(lossMin) - 0.05;
  const logMax = Math.log10(lossMax) + 0.05;
  const lossY = (v: number) =>
    lossArea.y + lossArea.height -
    ((Math.log10(Math.max(v, 10 ** logMin)) - logMin) / (logMax - logMin)) * lossArea.height;
  const lossX = xToPx(lossArea);

  // Accuracy panel (percent).
  const accY = (v: number) => accArea.y + accArea.height - v * accArea.height;
  const accX = xToPx(accArea);

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" fill="${COLORS.text}">`,
    `<rect width="100%" height="100%" fill="#fafafa"/>`,
    text(width / 2, 28, title, { "text-anchor": "middle", "font-size": 17, "font-weight": "bold" }),
  );
  if (options.subtitle) {
    parts.push(text(width / 2, 48, options.subtitle, { "text-anchor": "middle", "font-size": 12 }));
  }
  parts.push(drawAxes({
    area: lossArea,
    xMax,
    xTicks,
    yTicks: logTicks(10 ** logMin, 10 ** logMax),
    xToPx: lossX,
    yToPx: lossY,
    xLabel: "epoch",
    yLabel: "cross-entropy loss (log scale)",
    title: "Train loss",
  }));
  const clipLoss = `<clipPath id="loss-clip"><rect x="${fmt(lossArea.x)}" y="${
    fmt(lossArea.y)
  }" width="${fmt(lossArea.width)}" height="${fmt(lossArea.height)}"/></clipPath>`;
  parts.push(`<defs>${clipLoss}</defs>`, `<g clip-path="url(#loss-clip)">`);
  const steps = downsample(history.stepLoss, 1500)
    .filter(([, v]) => v > 0)
    .map(([i, v]): [number, number] => [lossX((i + 1) / perEpoch), lossY(v)]);
  parts.push(polyline(steps, `stroke="${COLORS.stepLoss}" stroke-width="1"`));
  const epochPoints = epochLoss.map((e): [number, number] => [lossX(e.epoch), lossY(e.trainLoss)]);
  parts.push(
    polyline(epochPoints, `stroke="${COLORS.epochLoss}" stroke-width="2.2"`),
    markers(epochPoints, COLORS.epochLoss),
    `</g>`,
  );
  parts.push(legend(lossArea, [
    { label: "loss per step", color: COLORS.stepLoss, width: 1.5 },
    { label: "mean loss per epoch", color: COLORS.epochLoss, width: 2.2 },
  ]));

  parts.push(drawAxes({
    area: accArea,
    xMax,
    xTicks,
    yTicks: [0, 0.2, 0.4, 0.6, 0.8, 1].map((v) => ({ value: v, label: `${Math.round(v * 100)}%` })),
    xToPx: accX,
    yToPx: accY,
    xLabel: "epoch",
    yLabel: "accuracy",
    title: "Accuracy",
  }));
  const chance = 1 / (options.classes ?? 3);
  parts.push(
    `<line x1="${fmt(accArea.x)}" y1="${fmt(accY(chance))}" x2="${
      fmt(accArea.x + accArea.width)
    }" y2="${fmt(accY(chance))}" stroke="${COLORS.chance}" stroke-dasharray="2 4"/>`,
  );
  const trainAcc = history.epochs.map((e): [number, number] => [
    accX(e.epoch),
    accY(e.trainAccuracy),
  ]);
  const testAcc = history.epochs.map((e): [number, number] => [
    accX(e.epoch),
    accY(e.testAccuracy),
  ]);
  parts.push(
    polyline(trainAcc, `stroke="${COLORS.trainAccuracy}" stroke-width="2" stroke-dasharray="6 3"`),
    markers(trainAcc, COLORS.trainAccuracy, 2.5),
    polyline(testAcc, `stroke="${COLORS.testAccuracy}" stroke-width="2.2"`),
    markers(testAcc, COLORS.testAccuracy),
  );
  const last = history.epochs.at(-1);
  const legendEntries = [
    { label: "train accuracy", color: COLORS.trainAccuracy, dash: "6 3" },
    {
      label: last ? `test accuracy (${(last.testAccuracy * 100).toFixed(1)}%)` : "test accuracy",
      color: COLORS.testAccuracy,
      width: 2.2,
    },
    { label: `chance (1/${options.classes ?? 3})`, color: COLORS.chance, dash: "2 4", width: 1 },
  ];
  parts.push(legend({ ...accArea, y: accArea.y + accArea.height - 70 }, legendEntries));
  parts.push(`</svg>`);
  return parts.join("\n") + "\n";
}
