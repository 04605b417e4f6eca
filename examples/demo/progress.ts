/**
 * Progress output for the demo: a one-line live bar for terminals, and the
 * number formats the plain per-epoch lines share with it.
 * @module
 */

/** Where training stands, for {@link formatProgress}. */
export interface ProgressState {
  /** The epoch in progress (1-based). */
  epoch: number;
  /** The last epoch of the run. */
  epochs: number;
  /** Steps done in this epoch. */
  step: number;
  /** Steps in an epoch. */
  steps: number;
  /** The latest train loss read back (NaN before the first read). */
  loss: number;
  /** Recent throughput in samples per second (NaN before it is known). */
  samplesPerSecond: number;
  /** Estimated seconds left in the run (NaN when unknown). */
  etaSeconds?: number;
}

/** `1:05`, `12:00`, `1:02:03` for a number of seconds; `--:--` when unknown. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "--:--";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

/** `12,345` (thousands separated, rounded); `-` when unknown. */
export function formatCount(value: number): string {
  if (!Number.isFinite(value)) return "-";
  return Math.round(value).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** A loss with 4 significant digits (`0.04312`); `-` when unknown. */
export function formatLoss(value: number): string {
  return Number.isFinite(value) ? value.toPrecision(4) : "-";
}

/** `97.3%` for 0.973. */
export function formatPercent(value: number): string {
  return Number.isFinite(value) ? `${(value * 100).toFixed(1)}%` : "-";
}

/** A bar of `width` cells, `fraction` of them filled, with eighth-cell resolution. */
export function bar(fraction: number, width: number): string {
  const f = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const eighths = Math.round(f * width * 8);
  const full = Math.floor(eighths / 8);
  const partial = eighths % 8;
  const partials = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
  const filled = "█".repeat(full) + (full < width ? partials[partial] : "");
  return filled + " ".repeat(Math.max(0, width - [...filled].length));
}

/**
 * One status line:
 * `epoch  3/40 |████▌     |  21/29  loss 0.4312  18,345 samples/s  ETA 0:42`.
 */
export function formatProgress(state: ProgressState, barWidth = 24): string {
  const epochDigits = String(state.epochs).length;
  const stepDigits = String(state.steps).length;
  const fraction = state.steps > 0 ? state.step / state.steps : 0;
  const parts = [
    `epoch ${String(state.epoch).padStart(epochDigits)}/${state.epochs}`,
    `|${bar(fraction, barWidth)}|`,
    `${String(state.step).padStart(stepDigits)}/${state.steps}`,
    `loss ${formatLoss(state.loss)}`,
    `${formatCount(state.samplesPerSecond)} samples/s`,
  ];
  if (state.etaSeconds !== undefined) parts.push(`ETA ${formatDuration(state.etaSeconds)}`);
  return parts.join("  ");
}

/**
 * A live status line for a terminal: each {@link update} redraws it in
 * place (carriage return and erase-line); {@link clear} removes it so that
 * ordinary lines can be printed, and the next update draws it again.
 */
export class ProgressBar {
  #shown = false;

  /**
   * Writes through `write` (raw text, no newline added); lines are cut to
   * `columns` characters so that they never wrap.
   */
  constructor(readonly write: (text: string) => void, readonly columns = 100) {}

  /** Redraws the line for `state`. */
  update(state: ProgressState): void {
    const width = Math.max(10, Math.min(30, this.columns - 80));
    let line = formatProgress(state, width);
    if ([...line].length > this.columns - 1) line = [...line].slice(0, this.columns - 1).join("");
    this.write(`\r\x1b[2K${line}`);
    this.#shown = true;
  }

  /** Erases the line if it is shown. */
  clear(): void {
    if (!this.#shown) return;
    this.write("\r\x1b[2K");
    this.#shown = false;
  }
}
