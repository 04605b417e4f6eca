/**
 * The `dawn` plugin: multigrad's webgpu backend on Dawn's Node bindings
 * (`npm:webgpu`), which list every adapter of the machine where Deno's
 * `navigator.gpu` hands out one, and read back in well under a millisecond
 * without relying on Deno's internals (see `early_map.ts`). Optional: the
 * core never imports it, and nothing is registered until
 * {@link registerDawn} is called. Needs `-A` (Dawn is a native addon).
 *
 * ```ts
 * import { requestDevices } from "@multigrad/core";
 * import { registerDawn } from "@multigrad/core/dawn";
 * registerDawn(); // backend "dawn", priority 3: the default from now on
 * const gpus = await requestDevices({ backend: "dawn", count: 2 });
 * console.log(gpus.map((d) => d.info));
 * ```
 *
 * One device per physical adapter: Dawn sees each GPU once per API
 * (Vulkan, OpenGL ES, ...), so the adapters of one API are used, the first
 * of the platform's APIs that has any (Linux: Vulkan, then OpenGL ES; where
 * Dawn finds only a GL adapter it runs in WebGPU's compatibility mode).
 * Dawn selects an adapter by name (`create(["adapter=<name>"])`), so two
 * adapters with the same name (two GPUs of one model) cannot both be
 * reached through it: such a group counts once, and `Device.info` says so.
 * @module
 */

import { create, globals } from "webgpu";
import { type Backend, type BackendFactory, registerBackend } from "../../../mod.ts";
import {
  type AdapterEntry,
  adapterEntry,
  backendOverAdapters,
  type MatmulTuning,
} from "../webgpu/mod.ts";

/** The version of `npm:webgpu` this plugin was written and tested against. */
export const DAWN_NODE_VERSION = "0.6.2";

/** One adapter as Dawn lists it. */
export interface DawnAdapter {
  /** Dawn's graphics API for it: `"vulkan"`, `"opengles"`, `"metal"`, `"d3d12"`, ... */
  readonly api: string;
  /** Dawn's name for it (what `create(["adapter=<name>"])` selects). */
  readonly name: string;
  /** How many adapters of the machine carry this name (Dawn reaches only the first). */
  readonly sameName: number;
  /** The WebGPU feature level it was found at (GL adapters are compatibility only). */
  readonly featureLevel: "core" | "compatibility";
}

/** Options of {@link listDawnAdapters}, {@link dawnBackend} and {@link registerDawn}. */
export interface DawnOptions {
  /**
   * Dawn APIs to look at, in order; the first that has adapters is used.
   * Default by platform: Linux `["vulkan", "opengles"]`, Windows
   * `["d3d12", "vulkan"]`, macOS `["metal"]`.
   */
  readonly apis?: readonly string[];
  /** Only adapters whose name contains this (case-sensitive, as Dawn matches). */
  readonly adapter?: string;
  /**
   * Devices per adapter (default 1): device `i` runs on adapter
   * `i mod adapters`, so `count: 2` on a two-GPU machine gives both GPUs.
   */
  readonly devicesPerAdapter?: number;
  /** More Dawn flags for `create()`, e.g. `"enable-dawn-features=allow_unsafe_apis"`. */
  readonly flags?: readonly string[];
  /** The devices' matmul tuning (for tests and benchmarks); default: chosen per adapter. */
  readonly matmul?: Partial<MatmulTuning>;
}

/** Options of {@link registerDawn}. */
export interface RegisterDawnOptions extends DawnOptions {
  /** The backend name (default `"dawn"`). */
  readonly name?: string;
  /** Registry priority (default 3: above the built-in webgpu backend's 2). */
  readonly priority?: number;
}

function defaultApis(): string[] {
  switch (Deno.build.os) {
    case "windows":
      return ["d3d12", "vulkan"];
    case "darwin":
      return ["metal"];
    default:
      return ["vulkan", "opengles"];
  }
}

/**
 * Dawn's GL backends need an EGL platform; without a display server Mesa
 * only offers the surfaceless one, and only when asked.
 */
function prepareGl(api: string): void {
  if (api !== "opengles" && api !== "opengl") return;
  try {
    const env = Deno.env;
    if (!env.get("EGL_PLATFORM") && !env.get("DISPLAY") && !env.get("WAYLAND_DISPLAY")) {
      env.set("EGL_PLATFORM", "surfaceless");
    }
  } catch {
    // No env permission: Dawn then finds what it finds.
  }
}

/** WebGPU's constants (`GPUBufferUsage`, ...) where the runtime lacks them; never replaces any. */
function installMissingGlobals(): void {
  const target = globalThis as Record<string, unknown>;
  for (const [key, value] of Object.entries(globals as Record<string, unknown>)) {
    if (!(key in target)) target[key] = value;
  }
}

const FEATURE_LEVELS = ["core", "compatibility"] as const;

/** A name no adapter has: Dawn then rejects with the list of the API's adapters. */
const NO_SUCH_ADAPTER = "multigrad: list the adapters";

/**
 * Dawn's adapters for one API at one feature level: requests one that does
 * not exist and reads the list from the rejection (dawn.node has no other way
 * to enumerate). An API without adapters resolves null instead.
 */
async function adaptersOf(
  api: string,
  featureLevel: "core" | "compatibility",
  flags: readonly string[],
): Promise<string[]> {
  prepareGl(api);
  const gpu = create([...flags, `backend=${api}`, `adapter=${NO_SUCH_ADAPTER}`]);
  try {
    const adapter = await gpu.requestAdapter({ featureLevel } as GPURequestAdapterOptions);
    if (adapter === null) return [];
    // Dawn only returns an adapter when its name matched; be safe anyway.
    return [];
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/unrecognised backend/.test(message)) return [];
    return [...message.matchAll(/\* backend: '[^']*', name: '(.*)'$/gm)].map((m) => m[1]);
  }
}

/**
 * The adapters the dawn backend would use: those of the first API in
 * `options.apis` that has any (core feature level first, then compatibility),
 * filtered by `options.adapter`, one entry per distinct name.
 */
export async function listDawnAdapters(options: DawnOptions = {}): Promise<DawnAdapter[]> {
  const flags = options.flags ?? [];
  for (const api of options.apis ?? defaultApis()) {
    for (const featureLevel of FEATURE_LEVELS) {
      const names = (await adaptersOf(api, featureLevel, flags))
        .filter((n) => options.adapter === undefined || n.includes(options.adapter));
      if (names.length === 0) continue;
      const counts = new Map<string, number>();
      for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
      return [...counts].map(([name, sameName]) => ({ api, name, sameName, featureLevel }));
    }
  }
  return [];
}

/** Opens the adapter `found` on its own Dawn instance. */
async function openAdapter(
  found: DawnAdapter,
  flags: readonly string[],
): Promise<AdapterEntry> {
  prepareGl(found.api);
  const gpu = create([...flags, `backend=${found.api}`, `adapter=${found.name}`]);
  const request = { featureLevel: found.featureLevel } as GPURequestAdapterOptions;
  const adapter = await gpu.requestAdapter(request);
  if (!adapter) {
    throw new Error(`dawn: adapter "${found.name}" (${found.api}) was listed but did not open`);
  }
  return adapterEntry(gpu, adapter, request);
}

/**
 * The webgpu backend on Dawn: one device per adapter (more with
 * `devicesPerAdapter`), each adapter on its own Dawn instance. Rejects when
 * Dawn finds no adapter (with what it looked at). Register it yourself, or
 * use {@link registerDawn}.
 */
export async function dawnBackend(
  options: DawnOptions & { readonly name?: string } = {},
): Promise<Backend> {
  const name = options.name ?? "dawn";
  const devicesPerAdapter = options.devicesPerAdapter ?? 1;
  if (!Number.isInteger(devicesPerAdapter) || devicesPerAdapter < 1) {
    throw new RangeError(
      `dawn: devicesPerAdapter must be a positive integer, got ${devicesPerAdapter}`,
    );
  }
  installMissingGlobals();
  const flags = options.flags ?? [];
  const found = await listDawnAdapters(options);
  if (found.length === 0) {
    const apis = (options.apis ?? defaultApis()).join(", ");
    const only = options.adapter === undefined ? "" : ` named like "${options.adapter}"`;
    throw new Error(`${name} backend unavailable: Dawn found no adapter${only} (APIs: ${apis})`);
  }
  const entries: AdapterEntry[] = [];
  for (const adapter of found) entries.push(await openAdapter(adapter, flags));
  return backendOverAdapters(entries, {
    name,
    devicesPerAdapter,
    matmul: options.matmul,
    // Dawn's reads take 0.1-0.3 ms: no latency worth hiding behind an extra submit.
    readAhead: false,
    info: (entry, index) => {
      const a = found[index % found.length];
      const mode = a.featureLevel === "compatibility" ? ", compatibility mode" : "";
      const twins = a.sameName > 1
        ? `; ${a.sameName} adapters carry this name and Dawn reaches only the first`
        : "";
      return `${a.name} (dawn ${a.api}${mode}, adapter ${(index % found.length) + 1} of ` +
        `${found.length}${twins}; ${entry.description})`;
    },
  });
}

/**
 * Registers {@link dawnBackend} as `options.name` (default `"dawn"`) with
 * priority 3 (above the built-in webgpu backend). Dawn starts on the first
 * request for one of its devices.
 */
export function registerDawn(options: RegisterDawnOptions = {}): void {
  const name = options.name ?? "dawn";
  const factory: BackendFactory = () => dawnBackend({ ...options, name });
  registerBackend(name, factory, { priority: options.priority ?? 3 });
}
