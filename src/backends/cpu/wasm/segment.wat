;; embeddingBag's bag sums (`segmentReduce`, modes sum and mean, and their
;; transpose, the weight's gradient) in WebAssembly SIMD (f32x4) for the cpu
;; backend, on arrays that live in the matmul kernel's shared memory, one
;; segment per call. JavaScript's loops spent 6-8 ns per looked-up row
;; element; these gather each row's 4-column blocks. Results are those of
;; the TypeScript loops bit for bit: the adds (and the products and
;; quotients) round in f32 as in float64 then float32, in the same order per
;; element. Byte addresses; positions, rows and columns as element counts.
;; Assembled by `deno run -A scripts/build_wasm.ts`.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; segment_sum(out, x, index, weights, weighted, start, end, rows, inner)
  ;; -> counted: out[c] = 0 + x[index[i], c] (times weights[i] when weighted)
  ;; over the positions i in [start, end) whose index is in [0, rows), in
  ;; order, for c < inner; returns how many positions counted.
  (func (export "segment_sum") (param $out i32) (param $x i32) (param $index i32)
    (param $weights i32) (param $weighted i32) (param $start i32) (param $end i32)
    (param $rows i32) (param $inner i32) (result i32)
    (local $c i32) (local $i i32) (local $r i32) (local $stride i32) (local $vend i32)
    (local $counted i32) (local $acc v128) (local $v v128) (local $sacc f32) (local $s f32)
    (local.set $stride (i32.shl (local.get $inner) (i32.const 2)))
    (local.set $vend (i32.and (local.get $inner) (i32.const -4)))
    (block $cdone (loop $cloop
      (br_if $cdone (i32.ge_u (local.get $c) (local.get $vend)))
      (local.set $acc (v128.const f32x4 0 0 0 0))
      (local.set $i (local.get $start))
      (block $idone (loop $iloop
        (br_if $idone (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $r (i32.load (i32.add (local.get $index) (i32.shl (local.get $i) (i32.const 2)))))
        ;; Unsigned: a negative row compares as huge and is skipped too.
        (if (i32.lt_u (local.get $r) (local.get $rows)) (then
          (local.set $v (v128.load (i32.add (local.get $x)
            (i32.add (i32.mul (local.get $r) (local.get $stride)) (i32.shl (local.get $c) (i32.const 2))))))
          (if (local.get $weighted) (then
            (local.set $v (f32x4.mul (local.get $v) (f32x4.splat
              (f32.load (i32.add (local.get $weights) (i32.shl (local.get $i) (i32.const 2)))))))))
          (local.set $acc (f32x4.add (local.get $acc) (local.get $v)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $iloop)))
      (v128.store (i32.add (local.get $out) (i32.shl (local.get $c) (i32.const 2))) (local.get $acc))
      (local.set $c (i32.add (local.get $c) (i32.const 4)))
      (br $cloop)))
    (block $tdone (loop $tloop
      (br_if $tdone (i32.ge_u (local.get $c) (local.get $inner)))
      (local.set $sacc (f32.const 0))
      (local.set $i (local.get $start))
      (block $sdone (loop $sloop
        (br_if $sdone (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $r (i32.load (i32.add (local.get $index) (i32.shl (local.get $i) (i32.const 2)))))
        (if (i32.lt_u (local.get $r) (local.get $rows)) (then
          (local.set $s (f32.load (i32.add (local.get $x)
            (i32.add (i32.mul (local.get $r) (local.get $stride)) (i32.shl (local.get $c) (i32.const 2))))))
          (if (local.get $weighted) (then
            (local.set $s (f32.mul (local.get $s)
              (f32.load (i32.add (local.get $weights) (i32.shl (local.get $i) (i32.const 2))))))))
          (local.set $sacc (f32.add (local.get $sacc) (local.get $s)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $sloop)))
      (f32.store (i32.add (local.get $out) (i32.shl (local.get $c) (i32.const 2))) (local.get $sacc))
      (local.set $c (i32.add (local.get $c) (i32.const 1)))
      (br $tloop)))
    (local.set $i (local.get $start))
    (block $ndone (loop $nloop
      (br_if $ndone (i32.ge_s (local.get $i) (local.get $end)))
      (if (i32.lt_u (i32.load (i32.add (local.get $index) (i32.shl (local.get $i) (i32.const 2))))
        (local.get $rows))
        (then (local.set $counted (i32.add (local.get $counted) (i32.const 1)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $nloop)))
    (local.get $counted))

  ;; segment_scatter(out, g, index, weights, weighted, start, end, rows, inner, div):
  ;; the transpose, for one segment whose row is g: out[index[i], c] +=
  ;; g[c] / div (times weights[i] when weighted) for the positions i in
  ;; [start, end) whose index is in [0, rows), in order.
  (func (export "segment_scatter") (param $out i32) (param $g i32) (param $index i32)
    (param $weights i32) (param $weighted i32) (param $start i32) (param $end i32)
    (param $rows i32) (param $inner i32) (param $div f32)
    (local $c i32) (local $i i32) (local $r i32) (local $at i32) (local $stride i32)
    (local $vend i32) (local $gv v128) (local $v v128) (local $gs f32) (local $s f32)
    (local.set $stride (i32.shl (local.get $inner) (i32.const 2)))
    (local.set $vend (i32.and (local.get $inner) (i32.const -4)))
    (block $cdone (loop $cloop
      (br_if $cdone (i32.ge_u (local.get $c) (local.get $vend)))
      (local.set $gv (f32x4.div
        (v128.load (i32.add (local.get $g) (i32.shl (local.get $c) (i32.const 2))))
        (f32x4.splat (local.get $div))))
      (local.set $i (local.get $start))
      (block $idone (loop $iloop
        (br_if $idone (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $r (i32.load (i32.add (local.get $index) (i32.shl (local.get $i) (i32.const 2)))))
        (if (i32.lt_u (local.get $r) (local.get $rows)) (then
          (local.set $v (local.get $gv))
          (if (local.get $weighted) (then
            (local.set $v (f32x4.mul (local.get $v) (f32x4.splat
              (f32.load (i32.add (local.get $weights) (i32.shl (local.get $i) (i32.const 2)))))))))
          (local.set $at (i32.add (local.get $out)
            (i32.add (i32.mul (local.get $r) (local.get $stride)) (i32.shl (local.get $c) (i32.const 2)))))
          (v128.store (local.get $at) (f32x4.add (v128.load (local.get $at)) (local.get $v)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $iloop)))
      (local.set $c (i32.add (local.get $c) (i32.const 4)))
      (br $cloop)))
    (block $tdone (loop $tloop
      (br_if $tdone (i32.ge_u (local.get $c) (local.get $inner)))
      (local.set $gs (f32.div (f32.load (i32.add (local.get $g) (i32.shl (local.get $c) (i32.const 2))))
        (local.get $div)))
      (local.set $i (local.get $start))
      (block $sdone (loop $sloop
        (br_if $sdone (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $r (i32.load (i32.add (local.get $index) (i32.shl (local.get $i) (i32.const 2)))))
        (if (i32.lt_u (local.get $r) (local.get $rows)) (then
          (local.set $s (local.get $gs))
          (if (local.get $weighted) (then
            (local.set $s (f32.mul (local.get $s)
              (f32.load (i32.add (local.get $weights) (i32.shl (local.get $i) (i32.const 2))))))))
          (local.set $at (i32.add (local.get $out)
            (i32.add (i32.mul (local.get $r) (local.get $stride)) (i32.shl (local.get $c) (i32.const 2)))))
          (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (local.get $s)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $sloop)))
      (local.set $c (i32.add (local.get $c) (i32.const 1)))
      (br $tloop))))
)
