/**
 * Devices and the backend registry: backends are plugins (a factory and a
 * priority, as TensorFlow.js registers them); devices are started on demand.
 * @module
 */

import type { Backend, BackendDevice, BackendFactory, MemoryInfo } from "./backends/backend.ts";
import { Stream } from "./stream.ts";

/** A started device: a backend's memory and kernels plus the stream that orders them. */
export class Device {
  /**
   * The in-order queue every operation on this device goes through: internal.
   * @ignore
   */
  readonly stream: Stream;

  /** Wraps a started backend device; use {@link requestDevices} rather than this. */
  constructor(
    /** The backend's registered name, e.g. `"webgpu"`. */
    readonly backend: string,
    /** Position among this backend's devices (0, 1, ...). */
    readonly index: number,
    /**
     * The backend's memory and kernel table for this device: internal.
     * @ignore
     */
    readonly backendDevice: BackendDevice,
  ) {
    this.stream = new Stream(`${backend}:${index}`);
  }

  /** The adapter or hardware description, where the backend has one. */
  get info(): string {
    return this.backendDevice.info;
  }

  /** Bytes this device's backend holds now. */
  memory(): MemoryInfo {
    return this.backendDevice.memory();
  }

  /** `"webgpu:1"`. */
  toString(): string {
    return `${this.backend}:${this.index}`;
  }
}

interface Registration {
  readonly factory: BackendFactory;
  readonly priority: number;
  started?: Promise<Backend>;
  /** Set when the factory returned synchronously: devices can start without await. */
  syncBackend?: Backend;
  failure?: string;
  readonly devices: Device[];
  readonly starting: Map<number, Promise<Device>>;
}

const registry = new Map<string, Registration>();
let defaultDeviceOverride: Device | null = null;

/** Options of {@link registerBackend}. */
export interface RegisterBackendOptions {
  /** Higher is tried first by {@link requestDevices}. Default 0. */
  priority?: number;
}

/**
 * Registers a backend under `name`. The factory runs once, when a device of
 * this backend is first requested; if it throws, the backend is skipped and
 * its reason shown in later errors. Registering a name again replaces it.
 */
export function registerBackend(
  name: string,
  factory: BackendFactory,
  options: RegisterBackendOptions = {},
): void {
  if (!/^[a-z][a-z0-9_-]*$/.test(name)) {
    throw new TypeError(
      `registerBackend: name must be lower-case letters, digits, - or _, got "${name}"`,
    );
  }
  const old = registry.get(name);
  if (old) unregisterBackend(name);
  registry.set(name, {
    factory,
    priority: options.priority ?? 0,
    devices: [],
    starting: new Map(),
  });
}

/** Removes a backend; its started devices are destroyed. */
export function unregisterBackend(name: string): void {
  const entry = registry.get(name);
  if (!entry) return;
  registry.delete(name);
  for (const d of entry.devices) {
    if (defaultDeviceOverride === d) defaultDeviceOverride = null;
    d.backendDevice.destroy();
  }
}

/** Registered backend names, highest priority first. */
export function backendNames(): string[] {
  return [...registry.entries()]
    .sort((a, b) => b[1].priority - a[1].priority)
    .map(([name]) => name);
}

/** Options of {@link requestDevices}. */
export interface RequestDevicesOptions {
  /** A backend name; default: the highest-priority backend that starts. */
  backend?: string;
  /** How many devices (default 1). */
  count?: number;
}

/**
 * Runs the backend's factory once. A synchronous factory's backend is also
 * kept in `syncBackend`, so that {@link device} can start devices without
 * await; a failure is kept in `failure` for later messages.
 */
function startBackend(name: string, entry: Registration): Promise<Backend> {
  if (entry.started) return entry.started;
  const fail = (error: unknown): Error => {
    entry.failure = error instanceof Error ? error.message : String(error);
    return new Error(`backend "${name}" cannot start: ${entry.failure}`, { cause: error });
  };
  try {
    const made = entry.factory();
    if (made instanceof Promise) {
      entry.started = made.catch((error) => {
        throw fail(error);
      });
    } else {
      entry.syncBackend = made;
      entry.started = Promise.resolve(made);
    }
  } catch (error) {
    entry.started = Promise.reject(fail(error));
  }
  // device() starts backends without awaiting them: their failure is kept, not unhandled.
  entry.started.catch(() => {});
  return entry.started;
}

function startDevice(
  name: string,
  entry: Registration,
  index: number,
): Promise<Device> {
  const existing = entry.devices[index];
  if (existing && !isLost(existing)) return Promise.resolve(existing);
  if (existing) {
    // A lost device is replaced by a fresh one under the same name; tensors
    // on the old one keep raising DeviceLostError.
    delete entry.devices[index];
    try {
      existing.backendDevice.destroy();
    } catch {
      // Already gone.
    }
  }
  let pending = entry.starting.get(index);
  if (!pending) {
    pending = (async () => {
      const backend = await startBackend(name, entry);
      try {
        const started = await backend.createDevice(index);
        // device() may have started it synchronously meanwhile: keep one Device per index.
        const raced = entry.devices[index];
        if (raced) {
          started.destroy();
          return raced;
        }
        const d = new Device(name, index, started);
        entry.devices[index] = d;
        // The replacement of a lost default device is the default.
        if (defaultDeviceOverride && defaultDeviceOverride === existing) defaultDeviceOverride = d;
        return d;
      } finally {
        entry.starting.delete(index);
      }
    })();
    entry.starting.set(index, pending);
  }
  return pending;
}

/** Whether `d` can run nothing more (its backend reports it lost or destroyed). */
function isLost(d: Device): boolean {
  try {
    d.backendDevice.checkAlive?.();
    return false;
  } catch {
    return true;
  }
}

/**
 * Starts (or returns the already started) devices `backend:0..count-1`.
 * Without `backend`, the highest-priority backend that starts is used. A
 * device found lost (after a `DeviceLostError`) is replaced by a fresh one.
 */
export async function requestDevices(
  options: RequestDevicesOptions = {},
): Promise<Device[]> {
  const count = options.count ?? 1;
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(
      `requestDevices: count must be a positive integer, got ${count}`,
    );
  }
  const names = options.backend ? [options.backend] : backendNames();
  const reasons: string[] = [];
  for (const name of names) {
    const entry = registry.get(name);
    if (!entry) {
      throw new Error(
        `requestDevices: no backend "${name}" is registered (registered: ${
          backendNames().join(", ") || "none"
        })`,
      );
    }
    try {
      const devices: Device[] = [];
      for (let i = 0; i < count; i++) {
        devices.push(await startDevice(name, entry, i));
      }
      return devices;
    } catch (error) {
      if (options.backend) throw error;
      reasons.push(
        `${name}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  throw new Error(
    `requestDevices: no backend could start (${reasons.join("; ")})`,
  );
}

/** Parses `"webgpu:1"`, `"cpu"` (index 0). */
function parseSpec(spec: string): { name: string; index: number } {
  const match = /^([a-z][a-z0-9_-]*)(?::(\d+))?$/.exec(spec);
  if (!match) {
    throw new TypeError(
      `device: "${spec}" is not a device name (expected "backend" or "backend:index", e.g. "webgpu:1")`,
    );
  }
  return {
    name: match[1],
    index: match[2] === undefined ? 0 : Number(match[2]),
  };
}

/**
 * A started device by name (`"webgpu:1"`, `"cpu"`). The `cpu` backend's
 * devices start on first use; others must come from {@link requestDevices}.
 */
export function device(spec: string | Device): Device {
  if (spec instanceof Device) return spec;
  const { name, index } = parseSpec(spec);
  const entry = registry.get(name);
  if (!entry) {
    throw new Error(
      `device("${spec}"): no backend "${name}" is registered (registered: ${
        backendNames().join(", ") || "none"
      })`,
    );
  }
  const found = entry.devices[index];
  if (found) return found;
  const started = startSync(name, entry, index);
  if (started) return started;
  const why = entry.failure ? ` (backend "${name}" failed: ${entry.failure})` : "";
  throw new Error(
    `device("${spec}") is not started: call await requestDevices({ backend: "${name}", count: ${
      index + 1
    } }) first${why}`,
  );
}

/** Starts a device synchronously when its backend allows (the cpu backend does). */
function startSync(
  name: string,
  entry: Registration,
  index: number,
): Device | null {
  startBackend(name, entry);
  if (!entry.syncBackend) return null;
  const started = entry.syncBackend.createDevice(index);
  if (started instanceof Promise) return null;
  const d = new Device(name, index, started);
  entry.devices[index] = d;
  return d;
}

/** Where factories put tensors: the one set by {@link setDefaultDevice}, else `cpu:0`. */
export function defaultDevice(): Device {
  return defaultDeviceOverride ?? device("cpu:0");
}

/** Sets where factories put tensors (a started device, or its name). */
export function setDefaultDevice(d: Device | string): void {
  defaultDeviceOverride = device(d);
}

/** Every started device, for memory reports. */
export function startedDevices(): Device[] {
  return [...registry.values()].flatMap((e) => e.devices.filter(Boolean));
}
