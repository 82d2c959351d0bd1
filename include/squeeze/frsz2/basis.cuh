// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/basis.cuh: what a CB-GMRES Krylov basis may be stored as (basis_storage:
// a plain type, or an FRSZ2 format of fp64 values) and how kernels see it (basis_ref).
#pragma once

#include <cstddef>
#include <type_traits>

#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/format.hpp"

namespace squeeze::frsz2 {

/// An FRSZ2 format of fp64 values.
template <class S>
concept fp64_format = format_like<S> && std::is_same_v<typename S::float_type, double>;

/// Storage a CB-GMRES basis may use: a plain type, or an FRSZ2 format of fp64 values.
template <class S>
concept basis_storage = plain_storage<S> || fp64_format<S>;

/// The basis as kernels see it: vector i is values [i * stride, i * stride + stride) of the
/// accessor handle `data` (stride a multiple of 128; the values past n are stored zeros).
template <basis_storage S>
struct basis_ref {
  typename accessor<S, double>::data_handle_type data{};  ///< vector 0's first value
  std::size_t stride = 0;                                 ///< values from one vector to the next
};

}  // namespace squeeze::frsz2
