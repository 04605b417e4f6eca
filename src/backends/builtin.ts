/**
 * The two backends that ship: `webgpu` (priority 2, loaded only when first
 * requested) and the `cpu` reference (priority 1). `mod.ts` registers them;
 * this file knows backends, not the registry.
 * @module
 */

import type { BackendFactory } from "./backend.ts";
import { cpuBackend } from "./cpu/mod.ts";

/** A backend to register at start-up. */
export interface BuiltinBackend {
  /** The registered name. */
  readonly name: string;
  /** Its factory. */
  readonly factory: BackendFactory;
  /** Its priority. */
  readonly priority: number;
}

/** The backends `mod.ts` registers. */
export const BUILTIN_BACKENDS: readonly BuiltinBackend[] = [
  { name: "cpu", factory: () => cpuBackend(), priority: 1 },
  {
    name: "webgpu",
    factory: async () => {
      const { webgpuBackend } = await import("./webgpu/mod.ts");
      return webgpuBackend({ name: "webgpu" });
    },
    priority: 2,
  },
];
