/**
 * The package's structure: no import circle, no arrow back up the layers
 * (`scripts/import_graph.ts`). The core's line budget is checked by
 * `scripts/core_size.ts` in CI, not here.
 */

import assert from "node:assert/strict";
import {
  circles,
  type Edge,
  ENTRY_POINTS,
  layerOf,
  upwardArrows,
  valueImports,
} from "../scripts/import_graph.ts";

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("imports: no circle among value imports, no arrow back up the layers", async () => {
  const edges = await valueImports(root, ENTRY_POINTS);
  assert.ok(edges.length > 100, `only ${edges.length} imports found: is deno info working?`);
  assert.deepEqual(circles(edges), [], "import circles");
  const upward = upwardArrows(edges).map(({ from, to }) => `${from} -> ${to}`);
  assert.deepEqual(upward, [], "upward arrows");
});

Deno.test("imports: the checker finds circles and upward arrows", () => {
  const edges: Edge[] = [
    { from: "src/tensor.ts", to: "src/ops/view.ts" },
    { from: "src/ops/view.ts", to: "src/tensor.ts" },
    { from: "src/ops/view.ts", to: "src/shape.ts" },
    { from: "src/nn/module.ts", to: "src/parallel/comm.ts" },
    { from: "src/backends/cpu/mod.ts", to: "src/device.ts" },
    { from: "src/parallel/mod.ts", to: "src/distributed/ddp.ts" },
  ];
  assert.deepEqual(circles(edges), [["src/ops/view.ts", "src/tensor.ts"]]);
  assert.deepEqual(upwardArrows(edges).map((e) => e.from), [
    "src/nn/module.ts",
    "src/backends/cpu/mod.ts",
  ]);
  assert.equal(layerOf("src/backends/backend.ts").name, "base");
  assert.equal(layerOf("src/ops/util.ts").name, "core");
  assert.throws(() => layerOf("elsewhere/x.ts"), /in no layer/);
});
