#!/bin/bash
# One device session: multigrad's webgpu backend on a real NVIDIA GPU (Vulkan through Deno's
# wgpu, and Dawn), then timings. Every step has its own time limit and log under $OUT.
# Carried (ignored) folders, made here before the call:
#   .gl/   apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 (amd64)
#   .gpu/  deno.xz (xz -c of the deno binary), npmcache.tar.xz (DENO_DIR's npm/registry.npmjs.org/
#          {webgpu (linux-x64 only), @webgpu, debug, ms}), deno.lock (deno.lock's entries for those)
# Run from the repository root: bash bench/device/run_h200.sh
set -u
T0=$(date +%s)
step() { echo "=== $(($(date +%s) - T0)) s: $*"; }
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ] &&
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
mkdir -p /tmp/bin /tmp/dd
xz -dc .gpu/deno.xz >/tmp/bin/deno && chmod +x /tmp/bin/deno
tar -xJf .gpu/npmcache.tar.xz -C /tmp/dd
cp .gpu/deno.lock deno.lock
export PATH=/tmp/bin:$PATH DENO_DIR=/tmp/dd DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
step setup done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tail -2
nproc; ldconfig -p | grep -c libvulkan; echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
deno --version | head -1
timeout 40 deno run -A bench/device/adapters.ts 2>&1 | grep -v XDG_RUNTIME
step adapters listed


# 1. the whole test suite, webgpu required (Vulkan on the NVIDIA GPU)
MULTIGRAD_REQUIRE_BACKENDS=webgpu timeout 180 deno test -A --parallel $(ls tests/*_test.ts | grep -v browser_test) >$OUT/test_vulkan.log 2>&1
echo "exit $?"; grep -E "FAILED|^ok \||^FAILED \||passed|failed" $OUT/test_vulkan.log | grep -v "^.* \.\.\. ok" | tail -25
step tests done

# 2. the conformance suites on the dawn plugin
timeout 100 deno task test:dawn >$OUT/test_dawn.log 2>&1
echo "exit $?"; tail -6 $OUT/test_dawn.log
step dawn tests done

# 3. timings: kernels and single-device steps, webgpu and dawn against cpu (16 cores)
timeout 120 deno run -A bench/main.ts --dawn --budget 1 --filter matmul --filter mlp \
  --filter small_step --filter dataparallel --json $OUT/bench.json >$OUT/bench.log 2>&1
echo "exit $?"; grep -v XDG_RUNTIME $OUT/bench.log | cut -c1-150
step bench done

# 4. DDP: webgpu ranks on one real GPU, cpu ranks on 16 cores
timeout 140 deno run -A bench/main.ts --filter ddp --json $OUT/ddp.json >$OUT/ddp.log 2>&1
echo "exit $?"; grep -v XDG_RUNTIME $OUT/ddp.log | cut -c1-160
step all done

# 5. map round trips, matmul kernel variants, the 2-rank webgpu example alone
timeout 30 deno run -A bench/device/map_round_trips.ts 2>&1 | grep -v XDG
(timeout 20 deno run -A bench/device/map_round_trips.ts "process A" &
  timeout 20 deno run -A bench/device/map_round_trips.ts "process B"; wait) 2>&1 | grep -v XDG
timeout 50 deno run -A bench/device/matmul_variants.ts 2>&1 | grep GFLOP
S=$(date +%s%N); timeout 30 deno run -A examples/seed003_ddp.ts --backend webgpu 2>&1 | tail -1
echo "seed003 webgpu exit ${PIPESTATUS[0]} in $(( ($(date +%s%N) - S) / 1000000 )) ms"
step checks done
