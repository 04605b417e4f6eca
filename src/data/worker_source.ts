/**
 * How a dataset reaches a `DataLoader` worker: the module reference a
 * dataset's `workerSource()` returns, also the form of `workerInitFn`.
 * @module
 */

/**
 * An exported function of a module, by URL, and the argument it is called
 * with: how code reaches a Worker, which shares no objects or functions
 * with the main thread (PyTorch's forked workers inherit them; Web Workers
 * start empty). `module` must be an absolute URL, e.g.
 * `new URL("./my_data.ts", import.meta.url)` or `import.meta.url` itself;
 * `args` must survive structured clone (numbers, strings, arrays, plain
 * objects, typed arrays).
 *
 * As a dataset's `workerSource()`, the export is `(args) => dataset` (or a
 * Promise of one) and builds the worker's copy; as `workerInitFn`, it is
 * `(workerId, args) => void` (or a Promise) and runs once in each worker
 * after the worker is seeded and its dataset built.
 *
 * @example
 * ```ts
 * // my_data.ts
 * export class Images extends data.Dataset<Tensor> {
 *   constructor(readonly dir: string) { super(); }
 *   get length() { return 1000; }
 *   get(i: number) { return decode(Deno.readFileSync(`${this.dir}/${i}.png`)); }
 *   workerSource(): data.WorkerSource {
 *     return { module: import.meta.url, export: "makeImages", args: this.dir };
 *   }
 * }
 * export function makeImages(dir: string) { return new Images(dir); }
 * ```
 */
export interface WorkerSource {
  /** Absolute URL of the module (a `URL`, or its string). */
  readonly module: string | URL;
  /** Name of the exported function. */
  readonly export: string;
  /** The argument it is called with (structured-cloned); default undefined. */
  readonly args?: unknown;
}
