// squeeze/io.hpp: data loaders used by the examples and benches (IDX, NumPy .npy).
#pragma once

#include "squeeze/io/idx.hpp"
#include "squeeze/io/npy.hpp"
