/**
 * The published docs show every runtime member of every namespace: `deno doc`
 * lists a namespace's members only when its module re-exports them with
 * `export *` (named re-exports are invisible to it), so a member added the
 * wrong way disappears from the docs while still working. This test compares
 * what `deno doc --json mod.ts` documents with what the namespaces export.
 */

import assert from "node:assert/strict";
import * as multigrad from "../mod.ts";

interface DocDeclaration {
  kind: string;
  def?: { elements?: DocSymbol[] };
}
interface DocSymbol {
  name: string;
  declarations: DocDeclaration[];
}

async function documentedNamespaces(): Promise<Map<string, Set<string>>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", new URL("../mod.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const json = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    nodes: Record<string, { symbols: DocSymbol[] }>;
  };
  const namespaces = new Map<string, Set<string>>();
  const visit = (symbol: DocSymbol, prefix: string) => {
    for (const decl of symbol.declarations) {
      if (decl.kind !== "namespace") continue;
      const path = prefix + symbol.name;
      const members = namespaces.get(path) ?? new Set<string>();
      namespaces.set(path, members);
      for (const element of decl.def?.elements ?? []) {
        members.add(element.name);
        visit(element, `${path}.`);
      }
    }
  };
  for (const node of Object.values(json.nodes)) for (const s of node.symbols) visit(s, "");
  return namespaces;
}

/**
 * Every namespace of mod.ts by its dotted path (`nn`, `nn.functional`, ...),
 * found by walking the runtime module objects, so a namespace added later is
 * checked without listing it here.
 */
function runtimeNamespaces(): Record<string, object> {
  const found: Record<string, object> = {};
  const walk = (prefix: string, module: object) => {
    for (const [name, value] of Object.entries(module)) {
      if (
        value !== null && typeof value === "object" &&
        (value as { [Symbol.toStringTag]?: unknown })[Symbol.toStringTag] === "Module"
      ) {
        const path = prefix + name;
        found[path] = value;
        walk(`${path}.`, value);
      }
    }
  };
  walk("", multigrad);
  return found;
}

Deno.test("deno doc documents every runtime member of every namespace", async () => {
  const documented = await documentedNamespaces();
  const runtime = runtimeNamespaces();
  // The walk reaches the nested namespaces too (a wrong walk would make this test vacuous).
  for (
    const path of [
      "nn",
      "nn.functional",
      "optim.lrScheduler",
      "linalg",
      "special",
      "autograd",
      "autograd.functional",
      "distributions",
      "distributions.transforms",
      "distributed",
      "utils",
      "utils.checkpoint",
    ]
  ) {
    assert.ok(path in runtime, `no runtime namespace ${path}`);
  }
  for (const [path, namespace] of Object.entries(runtime)) {
    const members = documented.get(path);
    assert.ok(members, `deno doc shows no namespace ${path}`);
    const missing = Object.keys(namespace).filter((name) => !members.has(name));
    assert.deepEqual(missing, [], `${path}: exported but not in deno doc: ${missing.join(", ")}`);
  }
  // Every class of the contract's namespaces is there, and nothing internal leaked.
  for (const name of ["Module", "Linear", "Sequential", "DataParallel", "BatchNorm1d"]) {
    assert.ok(documented.get("nn")!.has(name), `nn.${name}`);
  }
  for (const name of ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]) {
    assert.ok(documented.get("optim")!.has(name), `optim.${name}`);
  }
  for (const name of ["initProcessGroup", "spawn", "allReduce", "DistributedDataParallel"]) {
    assert.ok(documented.get("distributed")!.has(name), `distributed.${name}`);
  }
  for (
    const name of [
      "Dataset",
      "TensorDataset",
      "DataLoader",
      "DistributedSampler",
      "Subset",
      "randomSplit",
    ]
  ) {
    assert.ok(documented.get("data")!.has(name), `data.${name}`);
  }
  for (
    const [path, name] of [
      ["linalg", "solve"],
      ["linalg", "cholesky"],
      ["special", "i0"],
      ["special", "gammaln"],
      ["autograd", "grad"],
      ["utils.checkpoint", "checkpoint"],
      ["utils.checkpoint", "checkpointSequential"],
      ["distributions", "Normal"],
      ["distributions", "Distribution"],
    ]
  ) {
    assert.ok(documented.get(path)!.has(name), `${path}.${name}`);
  }
  for (
    const internal of [
      "pyFloat",
      "pyBool",
      "zeroGrads",
      "checkNumber",
      "checkModuleOn",
      "activeGroup",
      "readFlat",
      "setLocalLaunch",
      // Helpers moved out of the public files so that these can be `export *`'d.
      "seedsFor",
      "pivotRow",
      "choleskyInfo",
      "invWithInfo",
      "broadcastAll",
      "checkProbArg",
      "HalfDistribution",
      "standardGamma",
      "withFactor",
    ]
  ) {
    for (const path of Object.keys(runtime)) {
      assert.ok(!(internal in runtime[path]), `${path}.${internal} is internal`);
    }
  }
});
