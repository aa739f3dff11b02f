// Owns the CPU twin's attention passes declared in attention.h. A (sample, head) pair's T x d matrices are widened
// into fp32 tiles in the orientation the tensor stores them (a token's values side by side under NHWC, a value's
// tokens under NCHW), rows padded to whole chunks of kChunk values. Each product is one loop shape, a chunk of an
// output row summed over the inner dimension in ascending order in registers, arranged so that its outputs come out in
// the stored orientation too: a product whose output is stored transposed computes the transpose (C^T = B^T A^T).
// Only K (forward) or V (backward) under NHWC, and a T x T matrix under NCHW, are transposed on the way. Every output
// value is the same sum in the same order in both layouts, so NCHW and NHWC give the same bits. What the padding holds
// reaches only output lanes past the matrix's edge, which are never stored.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/attention.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/float_lanes.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/stored_values.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int kChunk = kFloatLanes;  // one AVX-512 register of fp32, two AVX2 ones
int padded(int n) { return (n + kChunk - 1) / kChunk * kChunk; }

// A pair's tile sizes: tokens T and head width d, each padded to whole chunks.
struct TileShape {
  int t, d, tp, dp;
  explicit TileShape(const AttentionShape& s)
      : t(s.tokens), d(s.head_dim), tp(padded(s.tokens)), dp(padded(s.head_dim)) {}
  int64_t token_tile() const { return std::max(int64_t{t} * dp, int64_t{d} * tp); }  // a T x d matrix, either way
  int64_t square() const { return int64_t{t} * tp; }                                  // a T x T matrix, rows tp apart
  int64_t floats() const { return 9 * token_tile() + 3 * square(); }
};

// A T x d matrix in a tile: value k of token i at data[i * token_stride + k * value_stride]. Token-major (rows of
// values, dp apart) or value-major (rows of tokens, tp apart).
struct TokenTile {
  float* data;
  int64_t token_stride, value_stride;
  bool value_major() const { return token_stride == 1; }
};
TokenTile token_major(const TileShape& g, float* data) { return {data, g.dp, 1}; }
TokenTile value_major(const TileShape& g, float* data) { return {data, 1, g.tp}; }
// A tile in the orientation view v stores the matrix: value-major where the stored matrix is the head's transpose.
TokenTile stored_tile(const TileShape& g, const MatrixView& v, float* data) {
  return v.transposed ? value_major(g, data) : token_major(g, data);
}

// One thread's tiles: the pair's T x d matrices; `other`, the one matrix a pass needs in the other orientation;
// scores (the probabilities, in place); gradient (dP, then dS in place); `square`, a T x T matrix transposed.
struct PairTiles {
  float *q, *k, *v, *dy, *y, *dq, *dk, *dv, *other, *scores, *gradient, *square;
  PairTiles(const TileShape& g, float* block) {
    float* next = block;
    auto take = [&](int64_t floats) { return std::exchange(next, next + floats); };
    for (float** tile : {&q, &k, &v, &dy, &y, &dq, &dk, &dv, &other}) *tile = take(g.token_tile());
    for (float** tile : {&scores, &gradient, &square}) *tile = take(g.square());
  }
};

// Operand A of a product: row r's i-th value at data[r * row + i * step] (step 1 for A, row 1 for A transposed).
struct Operand {
  const float* data;
  int64_t row, step;
};

using Lanes = FloatLanes;

// Rows [0, Rows) of C from row 0 of A, Chunks chunks of columns from b: c[r][lane] = alpha * the sum over i in
// [0, count) of A(r, i) * b[i * ldb + lane], in ascending i. The Rows x Chunks sums are independent chains: eight of
// them keep two multiply-add units busy through an addition's latency, where fewer would wait on it.
template <int Rows, int Chunks>
[[gnu::always_inline]] inline void block(int count, Operand a, const float* b, int64_t ldb, float alpha, float* c,
                                         int64_t ldc) {
  Lanes sum[Rows][Chunks] = {};
  for (int i = 0; i < count; ++i) {
    Lanes b_row[Chunks];
    for (int k = 0; k < Chunks; ++k) std::memcpy(&b_row[k], b + i * ldb + k * kChunk, sizeof(Lanes));
    for (int r = 0; r < Rows; ++r) {
      const float ai = a.data[r * a.row + i * a.step];
      for (int k = 0; k < Chunks; ++k) sum[r][k] += ai * b_row[k];
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int k = 0; k < Chunks; ++k) {
      const Lanes out = alpha * sum[r][k];
      std::memcpy(c + r * ldc + k * kChunk, &out, sizeof out);
    }
}

template <int Chunks>
[[gnu::always_inline]] inline void rows_block(int rows, int count, Operand a, const float* b, int64_t ldb, float alpha,
                                              float* c, int64_t ldc) {
  switch (rows) {
    case 4: return block<4, Chunks>(count, a, b, ldb, alpha, c, ldc);
    case 3: return block<3, Chunks>(count, a, b, ldb, alpha, c, ldc);
    case 2: return block<2, Chunks>(count, a, b, ldb, alpha, c, ldc);
    default: return block<1, Chunks>(count, a, b, ldb, alpha, c, ldc);
  }
}

constexpr int kBlockRows = 4;

// C (rows x padded columns, rows ldc apart) = alpha * A B over `inner` values, B's i-th row at b + i * ldb. The rows
// go in blocks of nearly equal size (17 as 3, 3, 4, 3 and 4), none left alone on one chain; the columns two chunks at
// a time, one where one is left.
void product(int rows, int columns, int inner, Operand a, const float* b, int64_t ldb, float alpha, float* c,
             int64_t ldc) {
  const int blocks = (rows + kBlockRows - 1) / kBlockRows;
  for (int block_index = 0; block_index < blocks; ++block_index) {
    const int r = rows * block_index / blocks, count = rows * (block_index + 1) / blocks - r;
    const Operand from_r{a.data + r * a.row, a.row, a.step};
    int j = 0;
    for (; j + 2 * kChunk <= columns; j += 2 * kChunk)
      rows_block<2>(count, inner, from_r, b + j, ldb, alpha, c + r * ldc + j, ldc);
    if (j < columns) rows_block<1>(count, inner, from_r, b + j, ldb, alpha, c + r * ldc + j, ldc);
  }
}

// Where a head's T x d matrix of sample n starts in a tensor of Stored values.
template <class Stored>
Stored* head_start(Stored* tensor, const MatrixView& v, int n) {
  return tensor + v.offset + int64_t{n} * v.sample_stride;
}

// The rows of the stored matrix at view v of sample n: T rows of d values (NHWC), or d rows of T tokens (NCHW).
struct StoredRows {
  int count, length;
  int64_t tile_ld;  // rows' distance in the tile of the stored orientation
};
StoredRows stored_rows(const TileShape& g, const MatrixView& v) {
  return v.transposed ? StoredRows{g.d, g.t, g.tp} : StoredRows{g.t, g.d, g.dp};
}

// The matrix at view v of sample n, widened into a tile of its stored orientation, one contiguous run at a time.
template <class Values>
TokenTile load(const TileShape& g, const MatrixView& v, int n, const void* tensor, float* data) {
  const auto* at = head_start(static_cast<const typename Values::Stored*>(tensor), v, n);
  const StoredRows rows = stored_rows(g, v);
  for (int r = 0; r < rows.count; ++r)
    for (int i = 0; i < rows.length; ++i) data[r * rows.tile_ld + i] = Values::load(at[int64_t{r} * v.ld + i]);
  return stored_tile(g, v, data);
}

// A tile of the stored orientation narrowed into view v of sample n.
template <class Values>
void store(const TileShape& g, const float* data, const MatrixView& v, int n, void* tensor) {
  auto* at = head_start(static_cast<typename Values::Stored*>(tensor), v, n);
  const StoredRows rows = stored_rows(g, v);
  for (int r = 0; r < rows.count; ++r)
    for (int i = 0; i < rows.length; ++i) at[int64_t{r} * v.ld + i] = Values::store(data[r * rows.tile_ld + i]);
}

// `to` (cols x rows, rows `to_ld` apart) = `from` (rows x cols, rows `from_ld` apart) transposed.
void transpose(int rows, int cols, const float* from, int64_t from_ld, float* to, int64_t to_ld) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) to[c * to_ld + r] = from[r * from_ld + c];
}

// x value-major: x itself, or its copy in `space`.
TokenTile value_major_of(const TileShape& g, TokenTile x, float* space) {
  if (x.value_major()) return x;
  transpose(g.t, g.d, x.data, x.token_stride, space, g.tp);
  return value_major(g, space);
}

// S (T x T, rows tp apart) = alpha * X Y^T over the values: S[i][j] = sum over k of X(i, k) Y(j, k). Y value-major.
void square_product(const TileShape& g, TokenTile x, TokenTile y, float alpha, float* s) {
  product(g.t, g.tp, g.d, {x.data, x.token_stride, x.value_stride}, y.data, y.value_stride, alpha, s, g.tp);
}

// A T x T matrix of the passes (rows tp apart), read as itself or as its transpose.
struct Square {
  const float* data;
  bool transposed;
};

// C (T x d, in c's orientation) = alpha * A B, A a T x T matrix, B a T x d tile (token-major where C is). Where C is
// value-major, its transpose B^T A^T is what runs, over A^T's rows: A itself where A is read transposed, else A
// transposed into `space`.
void token_product(const TileShape& g, Square a, TokenTile b, float alpha, TokenTile c, float* space) {
  if (!c.value_major()) {
    const Operand a_rows = a.transposed ? Operand{a.data, 1, g.tp} : Operand{a.data, g.tp, 1};
    return product(g.t, g.dp, g.t, a_rows, b.data, b.token_stride, alpha, c.data, c.token_stride);
  }
  const float* a_t = a.data;  // A^T row-major: A(i, j) at a_t[j * tp + i]
  if (!a.transposed) {
    transpose(g.t, g.t, a.data, g.tp, space, g.tp);
    a_t = space;
  }
  product(g.d, g.tp, g.t, {b.data, b.value_stride, b.token_stride}, a_t, g.tp, alpha, c.data, c.value_stride);
}

// The softmax of each row of scores (in place), over its first T values.
void softmax_rows(const TileShape& g, float* scores) {
  for (int i = 0; i < g.t; ++i) softmax_row(scores + int64_t{i} * g.tp, g.t);
}

// dp (in place) = the softmax's backward of dp given its output p.
void softmax_backward_rows(const TileShape& g, const float* p, float* dp) {
  for (int i = 0; i < g.t; ++i) softmax_backward_row(p + int64_t{i} * g.tp, dp + int64_t{i} * g.tp, g.t);
}

// Head h's kept probabilities of sample n.
template <class Stored>
Stored* kept_start(const AttentionShape& s, Stored* probabilities, int n, int h) {
  return head_start(probabilities, head_probabilities(s, h), n);
}

// The probabilities kept rounded, and the tile holding what is kept, which the product after reads, as on a GPU.
template <class Values>
void keep_rounded(const TileShape& g, float* p, typename Values::Stored* kept) {
  for (int i = 0; i < g.t; ++i)
    for (int j = 0; j < g.t; ++j) {
      float& value = p[int64_t{i} * g.tp + j];
      value = Values::load(kept[int64_t{i} * g.t + j] = Values::store(value));
    }
}

template <class Values>
void load_kept(const TileShape& g, const typename Values::Stored* kept, float* p) {
  for (int i = 0; i < g.t; ++i)
    for (int j = 0; j < g.t; ++j) p[int64_t{i} * g.tp + j] = Values::load(kept[int64_t{i} * g.t + j]);
}

// Calls pair(n, h, tiles) for every (sample, head) pair, the pairs shared among the compute threads.
template <class Pair>
void for_each_pair(const AttentionShape& s, AttentionWorkspace& ws, Pair&& pair) {
  const TileShape g(s);
  const int threads = compute_threads();
  ws.tiles.resize(static_cast<size_t>(g.floats() * threads));
  for_each_thread_run(threads, int64_t{s.batch} * s.heads, [&](int64_t first, int64_t end, int thread) {
    const PairTiles tiles(g, ws.tiles.data() + thread * g.floats());
    for (int64_t p = first; p < end; ++p) pair(static_cast<int>(p / s.heads), static_cast<int>(p % s.heads), tiles);
  });
}

template <class Values>
void forward(const AttentionShape& s, ActivationLayout layout, const void* qkv, void* y, void* probabilities,
             AttentionWorkspace& ws) {
  const TileShape g(s);
  const float scale = attention_scale(s);
  for_each_pair(s, ws, [&](int n, int h, const PairTiles& t) {
    const MatrixView y_view = head_matrix(s, layout, AttentionPart::y, h);
    const TokenTile q = load<Values>(g, head_matrix(s, layout, AttentionPart::q, h), n, qkv, t.q),
                    k = load<Values>(g, head_matrix(s, layout, AttentionPart::k, h), n, qkv, t.k),
                    v = load<Values>(g, head_matrix(s, layout, AttentionPart::v, h), n, qkv, t.v);
    square_product(g, q, value_major_of(g, k, t.other), scale, t.scores);  // scale Q K^T
    softmax_rows(g, t.scores);
    keep_rounded<Values>(g, t.scores, kept_start(s, static_cast<typename Values::Stored*>(probabilities), n, h));
    token_product(g, {t.scores, false}, v, 1, stored_tile(g, y_view, t.y), t.square);  // P V
    store<Values>(g, t.y, y_view, n, y);
  });
}

template <class Values>
void backward(const AttentionShape& s, ActivationLayout layout, const void* qkv, const void* probabilities,
              const void* dy, void* dqkv, AttentionWorkspace& ws) {
  const TileShape g(s);
  const float scale = attention_scale(s);
  for_each_pair(s, ws, [&](int n, int h, const PairTiles& t) {
    const MatrixView q_view = head_matrix(s, layout, AttentionPart::q, h),
                     k_view = head_matrix(s, layout, AttentionPart::k, h),
                     v_view = head_matrix(s, layout, AttentionPart::v, h);
    const TokenTile q = load<Values>(g, q_view, n, qkv, t.q), k = load<Values>(g, k_view, n, qkv, t.k),
                    v = load<Values>(g, v_view, n, qkv, t.v),
                    d_y = load<Values>(g, head_matrix(s, layout, AttentionPart::y, h), n, dy, t.dy);
    load_kept<Values>(g, kept_start(s, static_cast<const typename Values::Stored*>(probabilities), n, h), t.scores);
    token_product(g, {t.scores, true}, d_y, 1, stored_tile(g, v_view, t.dv), t.square);       // dV = P^T dY
    square_product(g, d_y, value_major_of(g, v, t.other), 1, t.gradient);                     // dP = dY V^T
    softmax_backward_rows(g, t.scores, t.gradient);                                            // dS
    token_product(g, {t.gradient, false}, k, scale, stored_tile(g, q_view, t.dq), t.square);  // dQ = scale dS K
    token_product(g, {t.gradient, true}, q, scale, stored_tile(g, k_view, t.dk), t.square);   // dK = scale dS^T Q
    store<Values>(g, t.dq, q_view, n, dqkv);
    store<Values>(g, t.dk, k_view, n, dqkv);
    store<Values>(g, t.dv, v_view, n, dqkv);
  });
}

}  // namespace

void attention_forward(const AttentionShape& s, ActivationLayout layout, const void* qkv, void* y,
                       void* probabilities, AttentionWorkspace& ws) {
  if (s.batch <= 0) return;
  with_stored_values(s.data, [&](auto values) {
    forward<decltype(values)>(s, layout, qkv, y, probabilities, ws);
  });
}

void attention_backward(const AttentionShape& s, ActivationLayout layout, const void* qkv, const void* probabilities,
                        const void* dy, void* dqkv, AttentionWorkspace& ws) {
  if (s.batch <= 0) return;
  with_stored_values(s.data, [&](auto values) {
    backward<decltype(values)>(s, layout, qkv, probabilities, dy, dqkv, ws);
  });
}

}  // namespace ringtrain::kernels::cpu
