// The in-page half of tests/browser_test.ts: imports the bundle and trains.
// The bundle exists only where the test serves it (built into a temporary
// folder), so it is imported by a computed URL that type checks leave alone.
const BUNDLE = new URL("./multigrad.js", import.meta.url).href;
const mg = await import(BUNDLE);

/** Why WebGPU cannot be used here, or null when an adapter is found. */
export async function webgpuUnavailable() {
  if (!("gpu" in navigator)) return "navigator.gpu is missing";
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return "navigator.gpu.requestAdapter() returned null";
  return null;
}

/**
 * One DataParallel training step of a small MLP on `count` devices of
 * `backend`: the loss on a fixed batch before and after, the devices, and a
 * safetensors round trip of the state dict (the browser's save/load).
 */
export async function trainStep(backend, count = 2) {
  const devices = await mg.requestDevices({ backend, count });
  mg.manualSeed(1);
  const model = new mg.nn.Sequential(
    new mg.nn.Linear(2, 16),
    new mg.nn.GELU(),
    new mg.nn.Linear(16, 3),
  ).to(devices[0]);
  const net = devices.length > 1 ? new mg.nn.DataParallel(model, { devices }) : model;
  const optimizer = new mg.optim.Adam(model.parameters(), { lr: 0.05 });
  const rows = 24;
  const x = mg.randn([rows, 2], { device: devices[0] });
  const y = mg.tensor(Array.from({ length: rows }, (_, i) => i % 3), {
    dtype: "int32",
    device: devices[0],
  });
  const lossOf = () => mg.nn.functional.crossEntropy(net.forward(x), y);
  const before = await mg.noGrad(() => mg.tidy(lossOf)).item();
  mg.tidy(() => {
    optimizer.zeroGrad();
    lossOf().backward();
    optimizer.step();
  });
  const after = await mg.noGrad(() => mg.tidy(lossOf)).item();
  const bytes = await mg.toSafetensors(model.stateDict());
  const restored = mg.fromSafetensors(bytes, { device: devices[0] });
  model.loadStateDict(restored);
  const again = await mg.noGrad(() => mg.tidy(lossOf)).item();
  return {
    devices: devices.map((d) => `${d}: ${d.info}`),
    before,
    after,
    again,
    safetensorsBytes: bytes.length,
  };
}
