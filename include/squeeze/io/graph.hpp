// SPDX-License-Identifier: Apache-2.0
// squeeze/io/graph.hpp: unweighted CSR graphs for the bam:: traversal examples and tests, in
// four headers:
//
//   graph_types.hpp      the graph type, its invariants (validate) and the builder from edges
//   graph_generate.hpp   seeded generators: Kronecker / R-MAT (Graph500, GAP "kron") and
//                        uniform random (GAP "urand"), bit-identical on every platform
//   graph_files.hpp      edge-list text, Matrix Market, and a binary file whose edge list a
//                        GPU can read through the bam cache at a 4096-byte aligned offset
//   graph_reference.hpp  host references for GPU traversals: BFS depths, connected
//                        components, the FirstVertexList of On-demand Implicit Tiling
//
// Host-only.
#pragma once

#include "squeeze/io/graph_files.hpp"
#include "squeeze/io/graph_generate.hpp"
#include "squeeze/io/graph_reference.hpp"
#include "squeeze/io/graph_types.hpp"
