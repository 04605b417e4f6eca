;; float32 elementwise and window loops in WebAssembly SIMD (f32x4) for the cpu backend,
;; run on arrays that already live in the matmul kernel's shared memory
;; (`heap.ts`: the backend's large float32 arrays), so nothing is copied in
;; or out. JavaScript's loops over such arrays ran at 1-2 ns per element;
;; these are memory-bound. Every function takes byte addresses and an
;; element count; results are those of the TypeScript loops bit for bit
;; (arithmetic on two float32 values rounds the same in f32 as in float64
;; then float32; selects and ReLU move bits), NaN payloads aside.
;; Assembled by `deno run -A scripts/build_wasm.ts`.
;;
;; Binary ops by number: 0 add, 1 sub, 2 mul, 3 div, 4 lt, 5 le, 6 gt, 7 ge
;; (comparisons give 1.0 or 0.0). `binary` takes two arrays, `binary_scalar`
;; an array and one value.

(module
  (import "env" "memory" (memory 1 16384 shared))

  ;; relu(out, x, n): x where !(x <= 0) (positive or NaN), else +0.
  (func (export "relu") (param $out i32) (param $x i32) (param $n i32)
    (local $end i32) (local $v v128) (local $s f32)
    (local.set $end (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done (loop $vec
      (br_if $done (i32.ge_u (local.get $x) (local.get $end)))
      (local.set $v (v128.load (local.get $x)))
      (v128.store (local.get $out)
        (v128.andnot (local.get $v) (f32x4.le (local.get $v) (v128.const f32x4 0 0 0 0))))
      (local.set $x (i32.add (local.get $x) (i32.const 16)))
      (local.set $out (i32.add (local.get $out) (i32.const 16)))
      (br $vec)))
    (local.set $end (i32.add (local.get $end) (i32.shl (i32.and (local.get $n) (i32.const 3)) (i32.const 2))))
    (block $tdone (loop $tail
      (br_if $tdone (i32.ge_u (local.get $x) (local.get $end)))
      (local.set $s (f32.load (local.get $x)))
      (i32.store (local.get $out)
        (select (i32.const 0) (i32.reinterpret_f32 (local.get $s)) (f32.le (local.get $s) (f32.const 0))))
      (local.set $x (i32.add (local.get $x) (i32.const 4)))
      (local.set $out (i32.add (local.get $out) (i32.const 4)))
      (br $tail))))

  ;; select_scalar(out, cond, a, b, n): the bits `a` where cond != 0
  ;; (NaN included), else b's element.
  (func (export "select_scalar") (param $out i32) (param $cond i32) (param $a i32) (param $b i32) (param $n i32)
    (local $end i32) (local $av v128)
    (local.set $av (i32x4.splat (local.get $a)))
    (local.set $end (i32.add (local.get $cond) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done (loop $vec
      (br_if $done (i32.ge_u (local.get $cond) (local.get $end)))
      (v128.store (local.get $out)
        (v128.bitselect (local.get $av) (v128.load (local.get $b))
          (f32x4.ne (v128.load (local.get $cond)) (v128.const f32x4 0 0 0 0))))
      (local.set $cond (i32.add (local.get $cond) (i32.const 16)))
      (local.set $b (i32.add (local.get $b) (i32.const 16)))
      (local.set $out (i32.add (local.get $out) (i32.const 16)))
      (br $vec)))
    (local.set $end (i32.add (local.get $end) (i32.shl (i32.and (local.get $n) (i32.const 3)) (i32.const 2))))
    (block $tdone (loop $tail
      (br_if $tdone (i32.ge_u (local.get $cond) (local.get $end)))
      (i32.store (local.get $out)
        (select (local.get $a) (i32.load (local.get $b)) (f32.ne (f32.load (local.get $cond)) (f32.const 0))))
      (local.set $cond (i32.add (local.get $cond) (i32.const 4)))
      (local.set $b (i32.add (local.get $b) (i32.const 4)))
      (local.set $out (i32.add (local.get $out) (i32.const 4)))
      (br $tail))))

  ;; binary(op, out, a, b, n): out[i] = a[i] op b[i].
  (func (export "binary") (param $op i32) (param $out i32) (param $a i32) (param $b i32) (param $n i32)
    (local $end i32) (local $tailEnd i32)
    (local.set $end (i32.add (local.get $a) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (local.set $tailEnd (i32.add (local.get $a) (i32.shl (local.get $n) (i32.const 2))))
    ;; add
    (if (i32.eq (local.get $op) (i32.const 0)) (then
      (block $done0 (loop $vec0
        (br_if $done0 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.add (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec0)))
      (block $tdone0 (loop $tail0
        (br_if $tdone0 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.add (f32.load (local.get $a)) (f32.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail0)))
      (return)))
    ;; sub
    (if (i32.eq (local.get $op) (i32.const 1)) (then
      (block $done1 (loop $vec1
        (br_if $done1 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.sub (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec1)))
      (block $tdone1 (loop $tail1
        (br_if $tdone1 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.sub (f32.load (local.get $a)) (f32.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail1)))
      (return)))
    ;; mul
    (if (i32.eq (local.get $op) (i32.const 2)) (then
      (block $done2 (loop $vec2
        (br_if $done2 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.mul (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec2)))
      (block $tdone2 (loop $tail2
        (br_if $tdone2 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.mul (f32.load (local.get $a)) (f32.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail2)))
      (return)))
    ;; div
    (if (i32.eq (local.get $op) (i32.const 3)) (then
      (block $done3 (loop $vec3
        (br_if $done3 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.div (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec3)))
      (block $tdone3 (loop $tail3
        (br_if $tdone3 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.div (f32.load (local.get $a)) (f32.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail3)))
      (return)))
    ;; lt
    (if (i32.eq (local.get $op) (i32.const 4)) (then
      (block $done4 (loop $vec4
        (br_if $done4 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.lt (v128.load (local.get $a)) (v128.load (local.get $b))) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec4)))
      (block $tdone4 (loop $tail4
        (br_if $tdone4 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.lt (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail4)))
      (return)))
    ;; le
    (if (i32.eq (local.get $op) (i32.const 5)) (then
      (block $done5 (loop $vec5
        (br_if $done5 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.le (v128.load (local.get $a)) (v128.load (local.get $b))) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec5)))
      (block $tdone5 (loop $tail5
        (br_if $tdone5 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.le (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail5)))
      (return)))
    ;; gt
    (if (i32.eq (local.get $op) (i32.const 6)) (then
      (block $done6 (loop $vec6
        (br_if $done6 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.gt (v128.load (local.get $a)) (v128.load (local.get $b))) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec6)))
      (block $tdone6 (loop $tail6
        (br_if $tdone6 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.gt (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail6)))
      (return)))
    ;; ge
    (if (i32.eq (local.get $op) (i32.const 7)) (then
      (block $done7 (loop $vec7
        (br_if $done7 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.ge (v128.load (local.get $a)) (v128.load (local.get $b))) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec7)))
      (block $tdone7 (loop $tail7
        (br_if $tdone7 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.ge (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail7)))
      (return))))

  ;; binary_scalar(op, out, a, v, n): out[i] = a[i] op v.
  (func (export "binary_scalar") (param $op i32) (param $out i32) (param $a i32) (param $v f32) (param $n i32)
    (local $end i32) (local $tailEnd i32) (local $bv v128)
    (local.set $bv (f32x4.splat (local.get $v)))
    (local.set $end (i32.add (local.get $a) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (local.set $tailEnd (i32.add (local.get $a) (i32.shl (local.get $n) (i32.const 2))))
    ;; add
    (if (i32.eq (local.get $op) (i32.const 0)) (then
      (block $done0 (loop $vec0
        (br_if $done0 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.add (v128.load (local.get $a)) (local.get $bv)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec0)))
      (block $tdone0 (loop $tail0
        (br_if $tdone0 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.add (f32.load (local.get $a)) (local.get $v)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail0)))
      (return)))
    ;; sub
    (if (i32.eq (local.get $op) (i32.const 1)) (then
      (block $done1 (loop $vec1
        (br_if $done1 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.sub (v128.load (local.get $a)) (local.get $bv)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec1)))
      (block $tdone1 (loop $tail1
        (br_if $tdone1 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.sub (f32.load (local.get $a)) (local.get $v)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail1)))
      (return)))
    ;; mul
    (if (i32.eq (local.get $op) (i32.const 2)) (then
      (block $done2 (loop $vec2
        (br_if $done2 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.mul (v128.load (local.get $a)) (local.get $bv)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec2)))
      (block $tdone2 (loop $tail2
        (br_if $tdone2 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.mul (f32.load (local.get $a)) (local.get $v)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail2)))
      (return)))
    ;; div
    (if (i32.eq (local.get $op) (i32.const 3)) (then
      (block $done3 (loop $vec3
        (br_if $done3 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (f32x4.div (v128.load (local.get $a)) (local.get $bv)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec3)))
      (block $tdone3 (loop $tail3
        (br_if $tdone3 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.div (f32.load (local.get $a)) (local.get $v)))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail3)))
      (return)))
    ;; lt
    (if (i32.eq (local.get $op) (i32.const 4)) (then
      (block $done4 (loop $vec4
        (br_if $done4 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.lt (v128.load (local.get $a)) (local.get $bv)) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec4)))
      (block $tdone4 (loop $tail4
        (br_if $tdone4 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.lt (f32.load (local.get $a)) (local.get $v))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail4)))
      (return)))
    ;; le
    (if (i32.eq (local.get $op) (i32.const 5)) (then
      (block $done5 (loop $vec5
        (br_if $done5 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.le (v128.load (local.get $a)) (local.get $bv)) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec5)))
      (block $tdone5 (loop $tail5
        (br_if $tdone5 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.le (f32.load (local.get $a)) (local.get $v))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail5)))
      (return)))
    ;; gt
    (if (i32.eq (local.get $op) (i32.const 6)) (then
      (block $done6 (loop $vec6
        (br_if $done6 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.gt (v128.load (local.get $a)) (local.get $bv)) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec6)))
      (block $tdone6 (loop $tail6
        (br_if $tdone6 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.gt (f32.load (local.get $a)) (local.get $v))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail6)))
      (return)))
    ;; ge
    (if (i32.eq (local.get $op) (i32.const 7)) (then
      (block $done7 (loop $vec7
        (br_if $done7 (i32.ge_u (local.get $a) (local.get $end)))
        (v128.store (local.get $out) (v128.and (f32x4.ge (v128.load (local.get $a)) (local.get $bv)) (v128.const f32x4 1 1 1 1)))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vec7)))
      (block $tdone7 (loop $tail7
        (br_if $tdone7 (i32.ge_u (local.get $a) (local.get $tailEnd)))
        (f32.store (local.get $out) (f32.convert_i32_u (f32.ge (f32.load (local.get $a)) (local.get $v))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $tail7)))
      (return))))

  ;; ceil(a / b) for b > 0 (i32.div_s truncates toward zero, which is the
  ;; ceiling for a <= 0).
  (func $ceilDiv (param $a i32) (param $b i32) (result i32)
    (if (result i32) (i32.gt_s (local.get $a) (i32.const 0))
      (then (i32.div_s (i32.sub (i32.add (local.get $a) (local.get $b)) (i32.const 1)) (local.get $b)))
      (else (i32.div_s (local.get $a) (local.get $b)))))

  ;; im2col(x, out, planes, H, W, kh, kw, outH, outW, sh, sw, ph, pw, dh, dw, pad):
  ;; the cpu `im2col` kernel's loop (see `kernels/im2col.ts`), columns
  ;; [planes, kh, kw, outH, outW], `pad` where a tap falls outside.
  (func (export "im2col")
    (param $x i32) (param $out i32) (param $planes i32) (param $H i32) (param $W i32)
    (param $kh i32) (param $kw i32) (param $outH i32) (param $outW i32)
    (param $sh i32) (param $sw i32) (param $ph i32) (param $pw i32)
    (param $dh i32) (param $dw i32) (param $pad f32)
    (local $p i32) (local $ki i32) (local $kj i32) (local $oh i32) (local $ow i32)
    (local $plane i32) (local $w0 i32) (local $lo i32) (local $hi i32) (local $h i32)
    (local $row i32) (local $step i32) (local $hi4 i32)
    (local.set $step (i32.shl (local.get $sw) (i32.const 2)))
    (local.set $p (i32.const 0))
    (block $pdone (loop $ploop
      (br_if $pdone (i32.ge_u (local.get $p) (local.get $planes)))
      (local.set $plane (i32.add (local.get $x)
        (i32.shl (i32.mul (local.get $p) (i32.mul (local.get $H) (local.get $W))) (i32.const 2))))
      (local.set $ki (i32.const 0))
      (block $kidone (loop $kiloop
        (br_if $kidone (i32.ge_u (local.get $ki) (local.get $kh)))
        (local.set $kj (i32.const 0))
        (block $kjdone (loop $kjloop
          (br_if $kjdone (i32.ge_u (local.get $kj) (local.get $kw)))
          (local.set $w0 (i32.sub (i32.mul (local.get $kj) (local.get $dw)) (local.get $pw)))
          ;; Output columns whose tap lands inside the row: lo <= ow < hi.
          (local.set $lo (call $ceilDiv (i32.sub (i32.const 0) (local.get $w0)) (local.get $sw)))
          (if (i32.lt_s (local.get $lo) (i32.const 0)) (then (local.set $lo (i32.const 0))))
          (if (i32.gt_s (local.get $lo) (local.get $outW)) (then (local.set $lo (local.get $outW))))
          (local.set $hi (call $ceilDiv (i32.sub (local.get $W) (local.get $w0)) (local.get $sw)))
          (if (i32.gt_s (local.get $hi) (local.get $outW)) (then (local.set $hi (local.get $outW))))
          (if (i32.lt_s (local.get $hi) (local.get $lo)) (then (local.set $hi (local.get $lo))))
          (local.set $oh (i32.const 0))
          (block $ohdone (loop $ohloop
            (br_if $ohdone (i32.ge_u (local.get $oh) (local.get $outH)))
            (local.set $h (i32.add (i32.sub (i32.mul (local.get $oh) (local.get $sh)) (local.get $ph))
              (i32.mul (local.get $ki) (local.get $dh))))
            (if (i32.or (i32.lt_s (local.get $h) (i32.const 0)) (i32.ge_s (local.get $h) (local.get $H)))
              (then
                (local.set $ow (i32.const 0))
                (block $fdone (loop $floop
                  (br_if $fdone (i32.ge_u (local.get $ow) (local.get $outW)))
                  (f32.store (i32.add (local.get $out) (i32.shl (local.get $ow) (i32.const 2))) (local.get $pad))
                  (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
                  (br $floop))))
              (else
                (local.set $row (i32.add (local.get $plane)
                  (i32.shl (i32.add (i32.mul (local.get $h) (local.get $W)) (local.get $w0)) (i32.const 2))))
                (local.set $ow (i32.const 0))
                (block $adone (loop $aloop
                  (br_if $adone (i32.ge_u (local.get $ow) (local.get $lo)))
                  (f32.store (i32.add (local.get $out) (i32.shl (local.get $ow) (i32.const 2))) (local.get $pad))
                  (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
                  (br $aloop)))
                (if (i32.eq (local.get $sw) (i32.const 1))
                  (then
                    ;; Four at a time, then one at a time.
                    (local.set $hi4 (i32.sub (local.get $hi) (i32.const 3)))
                    (block $vdone (loop $vloop
                      (br_if $vdone (i32.ge_s (local.get $ow) (local.get $hi4)))
                      (v128.store (i32.add (local.get $out) (i32.shl (local.get $ow) (i32.const 2)))
                        (v128.load (i32.add (local.get $row) (i32.shl (local.get $ow) (i32.const 2)))))
                      (local.set $ow (i32.add (local.get $ow) (i32.const 4)))
                      (br $vloop)))))
                (block $bdone (loop $bloop
                  (br_if $bdone (i32.ge_s (local.get $ow) (local.get $hi)))
                  (f32.store (i32.add (local.get $out) (i32.shl (local.get $ow) (i32.const 2)))
                    (f32.load (i32.add (local.get $row) (i32.mul (local.get $ow) (local.get $step)))))
                  (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
                  (br $bloop)))
                (block $cdone (loop $cloop
                  (br_if $cdone (i32.ge_s (local.get $ow) (local.get $outW)))
                  (f32.store (i32.add (local.get $out) (i32.shl (local.get $ow) (i32.const 2))) (local.get $pad))
                  (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
                  (br $cloop)))))
            (local.set $out (i32.add (local.get $out) (i32.shl (local.get $outW) (i32.const 2))))
            (local.set $oh (i32.add (local.get $oh) (i32.const 1)))
            (br $ohloop)))
          (local.set $kj (i32.add (local.get $kj) (i32.const 1)))
          (br $kjloop)))
        (local.set $ki (i32.add (local.get $ki) (i32.const 1)))
        (br $kiloop)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br $ploop))))

  ;; col2im(cols, out, planes, H, W, kh, kw, outH, outW, sh, sw, ph, pw, dh, dw):
  ;; the adjoint (see `kernels/col2im.ts`): out zeroed, then every column
  ;; entry added into the element its tap reads, in the TypeScript loop's
  ;; order (so the sums round the same).
  (func (export "col2im")
    (param $cols i32) (param $out i32) (param $planes i32) (param $H i32) (param $W i32)
    (param $kh i32) (param $kw i32) (param $outH i32) (param $outW i32)
    (param $sh i32) (param $sw i32) (param $ph i32) (param $pw i32)
    (param $dh i32) (param $dw i32)
    (local $p i32) (local $ki i32) (local $kj i32) (local $oh i32) (local $ow i32)
    (local $plane i32) (local $w0 i32) (local $lo i32) (local $hi i32) (local $h i32)
    (local $row i32) (local $step i32) (local $hi4 i32) (local $at i32)
    (memory.fill (local.get $out) (i32.const 0)
      (i32.shl (i32.mul (local.get $planes) (i32.mul (local.get $H) (local.get $W))) (i32.const 2)))
    (local.set $step (i32.shl (local.get $sw) (i32.const 2)))
    (local.set $p (i32.const 0))
    (block $pdone (loop $ploop
      (br_if $pdone (i32.ge_u (local.get $p) (local.get $planes)))
      (local.set $plane (i32.add (local.get $out)
        (i32.shl (i32.mul (local.get $p) (i32.mul (local.get $H) (local.get $W))) (i32.const 2))))
      (local.set $ki (i32.const 0))
      (block $kidone (loop $kiloop
        (br_if $kidone (i32.ge_u (local.get $ki) (local.get $kh)))
        (local.set $kj (i32.const 0))
        (block $kjdone (loop $kjloop
          (br_if $kjdone (i32.ge_u (local.get $kj) (local.get $kw)))
          (local.set $w0 (i32.sub (i32.mul (local.get $kj) (local.get $dw)) (local.get $pw)))
          (local.set $lo (call $ceilDiv (i32.sub (i32.const 0) (local.get $w0)) (local.get $sw)))
          (if (i32.lt_s (local.get $lo) (i32.const 0)) (then (local.set $lo (i32.const 0))))
          (if (i32.gt_s (local.get $lo) (local.get $outW)) (then (local.set $lo (local.get $outW))))
          (local.set $hi (call $ceilDiv (i32.sub (local.get $W) (local.get $w0)) (local.get $sw)))
          (if (i32.gt_s (local.get $hi) (local.get $outW)) (then (local.set $hi (local.get $outW))))
          (if (i32.lt_s (local.get $hi) (local.get $lo)) (then (local.set $hi (local.get $lo))))
          (local.set $oh (i32.const 0))
          (block $ohdone (loop $ohloop
            (br_if $ohdone (i32.ge_u (local.get $oh) (local.get $outH)))
            (local.set $h (i32.add (i32.sub (i32.mul (local.get $oh) (local.get $sh)) (local.get $ph))
              (i32.mul (local.get $ki) (local.get $dh))))
            (if (i32.and (i32.ge_s (local.get $h) (i32.const 0)) (i32.lt_s (local.get $h) (local.get $H)))
              (then
                (local.set $row (i32.add (local.get $plane)
                  (i32.shl (i32.add (i32.mul (local.get $h) (local.get $W)) (local.get $w0)) (i32.const 2))))
                (local.set $ow (local.get $lo))
                (if (i32.eq (local.get $sw) (i32.const 1))
                  (then
                    (local.set $hi4 (i32.sub (local.get $hi) (i32.const 3)))
                    (block $vdone (loop $vloop
                      (br_if $vdone (i32.ge_s (local.get $ow) (local.get $hi4)))
                      (local.set $at (i32.add (local.get $row) (i32.shl (local.get $ow) (i32.const 2))))
                      (v128.store (local.get $at) (f32x4.add (v128.load (local.get $at))
                        (v128.load (i32.add (local.get $cols) (i32.shl (local.get $ow) (i32.const 2))))))
                      (local.set $ow (i32.add (local.get $ow) (i32.const 4)))
                      (br $vloop)))))
                (block $bdone (loop $bloop
                  (br_if $bdone (i32.ge_s (local.get $ow) (local.get $hi)))
                  (local.set $at (i32.add (local.get $row) (i32.mul (local.get $ow) (local.get $step))))
                  (f32.store (local.get $at) (f32.add (f32.load (local.get $at))
                    (f32.load (i32.add (local.get $cols) (i32.shl (local.get $ow) (i32.const 2))))))
                  (local.set $ow (i32.add (local.get $ow) (i32.const 1)))
                  (br $bloop)))))
            (local.set $cols (i32.add (local.get $cols) (i32.shl (local.get $outW) (i32.const 2))))
            (local.set $oh (i32.add (local.get $oh) (i32.const 1)))
            (br $ohloop)))
          (local.set $kj (i32.add (local.get $kj) (i32.const 1)))
          (br $kjloop)))
        (local.set $ki (i32.add (local.get $ki) (i32.const 1)))
        (br $kiloop)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br $ploop))))

  ;; zero(out, bytes): a memset; TypedArray fill on a shared memory's array
  ;; ran 4-8x slower.
  (func (export "zero") (param $out i32) (param $bytes i32)
    (memory.fill (local.get $out) (i32.const 0) (local.get $bytes)))
)
