/**
 * What Deno's WebGPU and Dawn see on this machine, and what multigrad's cpu
 * and webgpu devices report: `deno run -A bench/device/adapters.ts`.
 * @module
 */

const a = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
const i = a?.info;
console.log("deno webgpu adapter:", i?.vendor, i?.architecture, i?.device, i?.description);
console.log(
  "limits: maxBufferSize",
  a?.limits.maxBufferSize,
  "maxStorageBufferBindingSize",
  a?.limits.maxStorageBufferBindingSize,
  "maxComputeInvocationsPerWorkgroup",
  a?.limits.maxComputeInvocationsPerWorkgroup,
);
const { listDawnAdapters } = await import("../../src/backends/dawn/mod.ts");
console.log("dawn adapters:", JSON.stringify(await listDawnAdapters()));
const { requestDevices } = await import("../../mod.ts");
for (const backend of ["cpu", "webgpu"]) {
  const [d] = await requestDevices({ backend, count: 1 });
  console.log(backend, d.info);
}
