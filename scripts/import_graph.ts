/**
 * Checks the package's import graph: no import circle among value imports
 * (`import type` is erased, so type-only edges cannot form a runtime
 * circle), and no arrow running back up the layers (see {@link LAYERS}).
 *
 *   deno run -A scripts/import_graph.ts
 *
 * Prints every circle and every upward arrow, and exits 1 if there is one.
 * The graph comes from `deno info --json` for each public entry point.
 * @module
 */

/** The entry points whose graphs are checked. */
export const ENTRY_POINTS = ["mod.ts", "src/backends/backend.ts", "src/backends/dawn/mod.ts"];

/**
 * Layers, lowest first: a file may import files of its own layer and of
 * the layers below, and of the other layers named in `mayImport`. Paths
 * are matched by prefix (first match wins), so more specific ones come
 * first.
 */
export const LAYERS: readonly {
  readonly name: string;
  readonly paths: readonly string[];
  readonly rank: number;
  /** Same-rank layers this one may also import. */
  readonly mayImport?: readonly string[];
}[] = [
  // The contract and the leaf helpers every layer uses.
  {
    name: "base",
    paths: [
      "src/backends/backend.ts",
      "src/dtype.ts",
      "src/shape.ts",
      "src/errors.ts",
      "src/util.ts",
    ],
    rank: 0,
  },
  // Backends know the contract and the leaf helpers only, never the core.
  { name: "backends", paths: ["src/backends/cpu/", "src/backends/webgpu/"], rank: 1 },
  { name: "builtin", paths: ["src/backends/builtin.ts"], rank: 2 },
  // The core: devices, memory, autograd, Tensor, the ops.
  { name: "core", paths: ["src/ops/", "src/"], rank: 1 },
  // Ops composed from the core's, with no kernels of their own; they install their methods.
  { name: "composite", paths: ["src/ops_composite/"], rank: 2, mayImport: ["autograd"] },
  // torch.autograd's functions (grad, functional) over the core's engine.
  { name: "autograd", paths: ["src/autograd/"], rank: 2 },
  // Libraries over the core, independent of each other.
  // nn.init's orthogonal_ is PyTorch's QR of a normal matrix (linalg never imports nn).
  { name: "nn", paths: ["src/nn/"], rank: 3, mayImport: ["linalg"] },
  // swa_utils averages and updates nn Modules (nn never imports optim).
  { name: "optim", paths: ["src/optim/"], rank: 3, mayImport: ["nn"] },
  { name: "data", paths: ["src/data/"], rank: 3 },
  { name: "serialization", paths: ["src/serialization/"], rank: 3 },
  { name: "linalg", paths: ["src/linalg/"], rank: 3 },
  { name: "distributions", paths: ["src/distributions/"], rank: 3, mayImport: ["linalg"] },
  // Training across devices and processes.
  { name: "distributed", paths: ["src/distributed/"], rank: 4 },
  { name: "parallel", paths: ["src/parallel/"], rank: 4, mayImport: ["distributed"] },
  // What users import: namespaces and entry points.
  { name: "public", paths: ["src/namespaces/", "mod.ts"], rank: 5 },
  { name: "plugins", paths: ["src/backends/dawn/"], rank: 6 },
];

/** A value import from one package file to another. */
export interface Edge {
  /** The importing file, relative to the package root. */
  readonly from: string;
  /** The imported file. */
  readonly to: string;
}

/** The layer of `path`. */
export function layerOf(path: string): (typeof LAYERS)[number] {
  let best: (typeof LAYERS)[number] | undefined;
  let bestLength = -1;
  for (const layer of LAYERS) {
    for (const prefix of layer.paths) {
      const matches = prefix.endsWith("/") ? path.startsWith(prefix) : path === prefix;
      if (matches && prefix.length > bestLength) {
        best = layer;
        bestLength = prefix.length;
      }
    }
  }
  if (!best) throw new Error(`import_graph: ${path} is in no layer; add it to LAYERS`);
  return best;
}

/** The value imports between package files reachable from `entries`. */
export async function valueImports(root: string, entries: readonly string[]): Promise<Edge[]> {
  const base = new URL(`file://${root.replace(/\/?$/, "/")}`).href;
  const edges = new Map<string, Edge>();
  for (const entry of entries) {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", entry],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!output.success) {
      throw new Error(`deno info ${entry} failed: ${new TextDecoder().decode(output.stderr)}`);
    }
    const info = JSON.parse(new TextDecoder().decode(output.stdout)) as {
      modules: { specifier: string; dependencies?: { code?: { specifier: string } }[] }[];
    };
    for (const module of info.modules) {
      if (!module.specifier.startsWith(base)) continue;
      const from = module.specifier.slice(base.length);
      for (const dependency of module.dependencies ?? []) {
        const target = dependency.code?.specifier;
        if (!target?.startsWith(base)) continue;
        const to = target.slice(base.length);
        edges.set(`${from} ${to}`, { from, to });
      }
    }
  }
  return [...edges.values()];
}

/** Every import circle (strongly connected set of more than one file, or a self-import). */
export function circles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) {
    if (!next.has(from)) next.set(from, []);
    next.get(from)!.push(to);
  }
  // Tarjan's algorithm, iterative so deep graphs cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  for (const start of next.keys()) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const [node, i] = frame;
      if (i === 0) {
        index.set(node, counter);
        low.set(node, counter++);
        stack.push(node);
        onStack.add(node);
      }
      const targets = next.get(node) ?? [];
      if (i < targets.length) {
        frame[1]++;
        const target = targets[i];
        if (!index.has(target)) work.push([target, 0]);
        else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent)!, low.get(node)!));
      }
      if (low.get(node) === index.get(node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== node);
        if (component.length > 1 || targets.includes(node)) found.push(component.sort());
      }
    }
  }
  return found;
}

/** The edges that run from a lower layer up, or sideways between layers that may not see each other. */
export function upwardArrows(edges: readonly Edge[]): Edge[] {
  return edges.filter(({ from, to }) => {
    const a = layerOf(from);
    const b = layerOf(to);
    if (a === b || b.rank < a.rank) return false;
    if (b.rank === a.rank && a.mayImport?.includes(b.name)) return false;
    return true;
  });
}

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname;
  const edges = await valueImports(root, ENTRY_POINTS);
  const loops = circles(edges);
  const upward = upwardArrows(edges);
  for (const loop of loops) console.log(`import circle: ${loop.join(" -> ")}`);
  for (const { from, to } of upward) {
    console.log(`upward arrow: ${from} (${layerOf(from).name}) -> ${to} (${layerOf(to).name})`);
  }
  console.log(
    `${edges.length} value imports: ${loops.length} circle(s), ${upward.length} upward arrow(s)`,
  );
  if (loops.length > 0 || upward.length > 0) Deno.exit(1);
}
