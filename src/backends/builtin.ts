/**
 * Registers the two backends that ship: `webgpu` (priority 2, loaded only
 * when first requested) and the `cpu` reference (priority 1).
 * @module
 */

import { registerBackend } from "../device.ts";
import { cpuBackend } from "./cpu/mod.ts";

registerBackend("cpu", () => cpuBackend(), { priority: 1 });
registerBackend("webgpu", async () => {
  const { webgpuBackend } = await import("./webgpu/mod.ts");
  return webgpuBackend({ name: "webgpu" });
}, { priority: 2 });
