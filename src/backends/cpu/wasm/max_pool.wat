;; The cpu backend's float32 2x2 max pool (stride 2, no padding) and its
;; gradient's scatter-add in WebAssembly, on arrays that live in the matmul
;; kernel's shared memory (`heap.ts`: float32 values and int32 positions),
;; read and written in place. The same choices as the TypeScript kernels
;; (`kernels/max_pool2d.ts`, `kernels/scatter_add.ts`), so the same bits.
;; Assembled by `deno run -A scripts/build_wasm.ts`.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; 1 where v beats the winner b: larger, or NaN (the last NaN wins, as PyTorch).
  (func $beats (param $v f32) (param $b f32) (result i32)
    (i32.or (f32.gt (local.get $v) (local.get $b)) (f32.ne (local.get $v) (local.get $v))))

  ;; The same, lanewise: all ones where v beats b.
  (func $beats4 (param $v v128) (param $b v128) (result v128)
    (v128.or (f32x4.gt (local.get $v) (local.get $b)) (f32x4.ne (local.get $v) (local.get $v))))

  ;; max_pool_2x2(x, out, indices, planes, H, W, outH, outW): per window the
  ;; first maximum of each row's pair, then of the two rows' winners; its
  ;; position in the plane into `indices`.
  (func (export "max_pool_2x2") (param $x i32) (param $out i32) (param $indices i32)
    (param $planes i32) (param $H i32) (param $W i32) (param $outH i32) (param $outW i32)
    (local $p i32) (local $oh i32) (local $ow i32) (local $base i32) (local $a i32)
    (local $top i32) (local $bottom i32) (local $best i32) (local $rowBytes i32)
    (local $at v128) (local $t0 v128) (local $t1 v128) (local $even v128) (local $odd v128) (local $m v128)
    (local $topV v128) (local $topI v128) (local $botV v128) (local $botI v128)
    (local.set $rowBytes (i32.shl (local.get $W) (i32.const 2)))
    (block $pdone (loop $ploop
      (br_if $pdone (i32.ge_u (local.get $p) (local.get $planes)))
      (local.set $base (i32.add (local.get $x)
        (i32.shl (i32.mul (local.get $p) (i32.mul (local.get $H) (local.get $W))) (i32.const 2))))
      (local.set $oh (i32.const 0))
      (block $hdone (loop $hloop
        (br_if $hdone (i32.ge_u (local.get $oh) (local.get $outH)))
        (local.set $a (i32.add (local.get $base) (i32.mul (i32.shl (local.get $oh) (i32.const 1)) (local.get $rowBytes))))
        (local.set $ow (i32.const 0))
        ;; Four windows at a time: the even and odd columns of 8 values of
        ;; each row, the same choices lanewise, positions as i32 lanes.
        (local.set $at (i32x4.add (i32x4.splat (i32.mul (i32.shl (local.get $oh) (i32.const 1)) (local.get $W)))
          (v128.const i32x4 0 2 4 6)))
        (block $vdone (loop $vloop
          (br_if $vdone (i32.gt_s (i32.add (local.get $ow) (i32.const 4)) (local.get $outW)))
          (local.set $t0 (v128.load (local.get $a)))
          (local.set $t1 (v128.load offset=16 (local.get $a)))
          (local.set $even (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $t0) (local.get $t1)))
          (local.set $odd (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $t0) (local.get $t1)))
          (local.set $m (call $beats4 (local.get $odd) (local.get $even)))
          (local.set $topV (v128.bitselect (local.get $odd) (local.get $even) (local.get $m)))
          (local.set $topI (i32x4.sub (local.get $at) (local.get $m)))
          (local.set $t0 (v128.load (i32.add (local.get $a) (local.get $rowBytes))))
          (local.set $t1 (v128.load offset=16 (i32.add (local.get $a) (local.get $rowBytes))))
          (local.set $even (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $t0) (local.get $t1)))
          (local.set $odd (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $t0) (local.get $t1)))
          (local.set $m (call $beats4 (local.get $odd) (local.get $even)))
          (local.set $botV (v128.bitselect (local.get $odd) (local.get $even) (local.get $m)))
          (local.set $botI (i32x4.sub (i32x4.add (local.get $at) (i32x4.splat (local.get $W))) (local.get $m)))
          (local.set $m (call $beats4 (local.get $botV) (local.get $topV)))
          (v128.store (local.get $out) (v128.bitselect (local.get $botV) (local.get $topV) (local.get $m)))
          (v128.store (local.get $indices) (v128.bitselect (local.get $botI) (local.get $topI) (local.get $m)))
          (local.set $at (i32x4.add (local.get $at) (v128.const i32x4 8 8 8 8)))
          (local.set $out (i32.add (local.get $out) (i32.const 16)))
          (local.set $indices (i32.add (local.get $indices) (i32.const 16)))
          (local.set $a (i32.add (local.get $a) (i32.const 32)))
          (local.set $ow (i32.add (local.get $ow) (i32.const 4)))
          (br $vloop)))
        (block $wdone (loop $wloop
          (br_if $wdone (i32.ge_u (local.get $ow) (local.get $outW)))
          (local.set $top (i32.add (local.get $a)
            (i32.shl (call $beats (f32.load offset=4 (local.get $a)) (f32.load (local.get $a))) (i32.const 2))))
          (local.set $bottom (i32.add (local.get $a) (local.get $rowBytes)))
          (local.set $bottom (i32.add (local.get $bottom)
            (i32.shl (call $beats (f32.load offset=4 (local.get $bottom)) (f32.load (local.get $bottom))) (i32.const 2))))
          (local.set $best (select (local.get $bottom) (local.get $top)
            (call $beats (f32.load (local.get $bottom)) (f32.load (local.get $top)))))
          (f32.store (local.get $out) (f32.load (local.get $best)))
          (i32.store (local.get $indices) (i32.shr_u (i32.sub (local.get $best) (local.get $base)) (i32.const 2)))
          (local.set $out (i32.add (local.get $out) (i32.const 4)))
          (local.set $indices (i32.add (local.get $indices) (i32.const 4)))
          (local.set $a (i32.add (local.get $a) (i32.const 8)))
          (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
          (br $wloop)))
        (local.set $oh (i32.add (local.get $oh) (i32.const 1)))
        (br $hloop)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br $ploop))))

  ;; scatter_add_rows(src, index, out, outer, size, count): out [outer, size]
  ;; zeroed, then out[o, index[o, j]] += src[o, j] for j < count in order,
  ;; indices outside [0, size) skipped (the scatter-add's inner = 1).
  (func (export "scatter_add_rows") (param $src i32) (param $index i32) (param $out i32)
    (param $outer i32) (param $size i32) (param $count i32)
    (local $o i32) (local $j i32) (local $r i32) (local $at i32)
    (memory.fill (local.get $out) (i32.const 0)
      (i32.shl (i32.mul (local.get $outer) (local.get $size)) (i32.const 2)))
    (block $odone (loop $oloop
      (br_if $odone (i32.ge_u (local.get $o) (local.get $outer)))
      (local.set $j (i32.const 0))
      (block $jdone (loop $jloop
        (br_if $jdone (i32.ge_u (local.get $j) (local.get $count)))
        (local.set $r (i32.load (local.get $index)))
        ;; Unsigned: negative positions compare as huge and are skipped too.
        (if (i32.lt_u (local.get $r) (local.get $size)) (then
          (local.set $at (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))))
          (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load (local.get $src))))))
        (local.set $src (i32.add (local.get $src) (i32.const 4)))
        (local.set $index (i32.add (local.get $index) (i32.const 4)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $jloop)))
      (local.set $out (i32.add (local.get $out) (i32.shl (local.get $size) (i32.const 2))))
      (local.set $o (i32.add (local.get $o) (i32.const 1)))
      (br $oloop))))
)
