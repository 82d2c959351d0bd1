// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the CSR checks on arbitrary arrays. io::validate of a csr_matrix (several value
// and index types) and of a graph must accept exactly what an independent, plain check of the
// documented invariants accepts, and report the rest as a squeeze::error; accepted ones must
// survive spmv_reference, bfs_reference, cc_reference and first_vertex_list.
// csr_from_coordinates on arbitrary entries must give a matrix that passes validate, or a
// squeeze::error.
#include <squeeze/io/csr.hpp>
#include <squeeze/io/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

using squeeze::fuzz::take;

struct input {
  const std::uint8_t* data;
  std::size_t size;
  template <class T>
  T next() {
    return take<T>(data, size);
  }
};

// The invariants of csr_matrix, as its comment states them.
template <class Value, class Index>
bool csr_holds(const io::csr_matrix<Value, Index>& a) {
  if (a.rows < 0 || a.cols < 0) return false;
  if (a.row_ptr.size() - 1 != static_cast<std::uint64_t>(a.rows) || a.row_ptr.empty()) {
    return false;
  }
  if (a.row_ptr.front() != 0) return false;
  if (!std::is_sorted(a.row_ptr.begin(), a.row_ptr.end())) return false;
  if (a.col_idx.size() != a.values.size()) return false;
  if (static_cast<std::uint64_t>(a.row_ptr.back()) != a.col_idx.size()) return false;
  for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r) {
    const auto first = a.col_idx.begin() + static_cast<std::ptrdiff_t>(a.row_ptr[r]);
    const auto last = a.col_idx.begin() + static_cast<std::ptrdiff_t>(a.row_ptr[r + 1]);
    for (auto k = first; k != last; ++k) {
      if (*k < 0 || static_cast<std::int64_t>(*k) >= a.cols) return false;
      if (k != first && *k <= *(k - 1)) return false;
    }
  }
  return true;
}

template <class Value, class Index>
void fuzz_csr(input& in) {
  const auto flags = in.next<std::uint8_t>();
  const std::size_t n_ptr = in.next<std::uint8_t>() % 48;
  const std::size_t n_col = in.next<std::uint8_t>() % 96;
  io::csr_matrix<Value, Index> a;
  a.rows = (flags & 1) != 0 ? in.next<std::int64_t>() : static_cast<std::int64_t>(n_ptr) - 1;
  a.cols = (flags & 2) != 0 ? in.next<std::int64_t>() : in.next<std::uint8_t>() % 16;
  Index sum = 0;
  for (std::size_t i = 0; i < n_ptr; ++i) {  // raw offsets, or running sums of small steps
    a.row_ptr.push_back((flags & 4) != 0 ? in.next<Index>() : sum);
    sum = static_cast<Index>(sum + in.next<std::uint8_t>() % 4);
  }
  for (std::size_t i = 0; i < n_col; ++i) {
    a.col_idx.push_back((flags & 8) != 0 ? in.next<Index>()
                                         : static_cast<Index>(in.next<std::uint8_t>() % 16));
  }
  const std::size_t n_val = (flags & 16) != 0 ? n_col + (flags >> 5) % 3 : n_col;
  for (std::size_t i = 0; i < n_val; ++i) a.values.push_back(in.next<Value>());
  bool valid = true;
  try {
    io::validate(a);
  } catch (const squeeze::error&) {
    valid = false;
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(valid == csr_holds(a));
  if (valid && a.cols <= 4096) {
    const std::vector<Value> x(static_cast<std::size_t>(a.cols), Value{1});
    std::vector<Value> y(static_cast<std::size_t>(a.rows));
    io::spmv_reference<Value, Index>(a, x, y);
  }
}

template <class Value, class Index>
void fuzz_from_coordinates(input& in) {
  const std::int64_t rows = in.next<std::int8_t>(), cols = in.next<std::int8_t>();
  std::vector<io::coordinate_entry<Value>> entries(in.next<std::uint8_t>() % 64);
  for (auto& e : entries) {
    e = {in.next<std::int8_t>(), in.next<std::int8_t>(), in.next<Value>()};
  }
  try {
    const io::csr_matrix<Value, Index> a =
        io::csr_from_coordinates<Value, Index>(rows, cols, entries);
    SQUEEZE_FUZZ_ASSERT_TRUE(a.rows == rows && a.cols == cols && csr_holds(a));
    SQUEEZE_FUZZ_ASSERT_TRUE(static_cast<std::size_t>(a.nnz()) <= entries.size());
  } catch (const squeeze::error&) {
  }
}

// The invariants of graph, as its comment states them.
bool graph_holds(const io::graph& g) {
  const auto& off = g.row_offsets;
  if (off.empty() || off.front() != 0 || !std::is_sorted(off.begin(), off.end())) return false;
  if (off.back() != g.neighbors.size()) return false;
  const std::uint64_t n = off.size() - 1;
  for (std::uint64_t u = 0; u < n; ++u) {
    for (std::uint64_t k = off[u]; k < off[u + 1]; ++k) {
      const std::uint32_t v = g.neighbors[k];
      if (v >= n || v == u || (k > off[u] && v <= g.neighbors[k - 1])) return false;
    }
  }
  if (g.directed) return true;
  for (std::uint64_t u = 0; u < n; ++u) {
    for (std::uint64_t k = off[u]; k < off[u + 1]; ++k) {
      const std::uint32_t v = g.neighbors[k];
      const auto first = g.neighbors.begin() + static_cast<std::ptrdiff_t>(off[v]);
      const auto last = g.neighbors.begin() + static_cast<std::ptrdiff_t>(off[v + 1]);
      if (!std::binary_search(first, last, static_cast<std::uint32_t>(u))) return false;
    }
  }
  return true;
}

void fuzz_graph(input& in) {
  const auto flags = in.next<std::uint8_t>();
  const std::size_t n_off = in.next<std::uint8_t>() % 40;
  const std::size_t n_nb = in.next<std::uint8_t>() % 96;
  io::graph g;
  g.directed = (flags & 1) != 0;
  g.row_offsets.clear();
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n_off; ++i) {  // raw offsets, or running sums of small steps
    g.row_offsets.push_back((flags & 2) != 0 ? in.next<std::uint64_t>() : sum);
    sum += in.next<std::uint8_t>() % 4;
  }
  const std::uint32_t n = n_off == 0 ? 1 : static_cast<std::uint32_t>(n_off);
  for (std::size_t i = 0; i < n_nb; ++i) {
    g.neighbors.push_back((flags & 4) != 0 ? in.next<std::uint32_t>()
                                           : in.next<std::uint8_t>() % n);
  }
  bool valid = true;
  try {
    io::validate(g, 1 + (flags >> 7));
  } catch (const squeeze::error&) {
    valid = false;
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(valid == graph_holds(g));
  if (!valid) return;
  if (g.num_vertices() > 0) {
    const std::vector<std::uint32_t> depth = io::bfs_reference(g, 0);
    SQUEEZE_FUZZ_ASSERT_TRUE(depth[0] == 0);
  }
  if (!g.directed) {
    const std::vector<std::uint32_t> label = io::cc_reference(g);
    for (std::size_t v = 0; v < label.size(); ++v) SQUEEZE_FUZZ_ASSERT_TRUE(label[v] <= v);
  }
  const std::vector<std::uint32_t> fvl = io::first_vertex_list(g, 1 + (flags >> 3) % 8);
  for (const std::uint32_t v : fvl) SQUEEZE_FUZZ_ASSERT_TRUE(v < g.num_vertices());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  switch (in.next<std::uint8_t>() % 7) {
    case 0: fuzz_csr<double, std::int32_t>(in); break;
    case 1: fuzz_csr<float, std::int64_t>(in); break;
    case 2: fuzz_csr<double, std::uint8_t>(in); break;
    case 3: fuzz_csr<float, std::int8_t>(in); break;
    case 4: fuzz_from_coordinates<double, std::int32_t>(in); break;
    case 5: fuzz_from_coordinates<float, std::int8_t>(in); break;
    default: fuzz_graph(in); break;
  }
  return 0;
}
