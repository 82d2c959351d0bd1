// SPDX-License-Identifier: Apache-2.0
// squeeze/io.hpp: data loaders used by the examples and benches (IDX, NumPy .npy, Matrix Market,
// CSR matrices, generated stencil matrices, graphs: generators, files, BFS/CC references).
#pragma once

#include "squeeze/io/csr.hpp"
#include "squeeze/io/graph.hpp"
#include "squeeze/io/idx.hpp"
#include "squeeze/io/matrix_market.hpp"
#include "squeeze/io/npy.hpp"
#include "squeeze/io/stencil.hpp"
