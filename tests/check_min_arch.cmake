# SPDX-License-Identifier: Apache-2.0
# ctest build.min_arch_is_enforced: compiles a kernel that includes squeeze/core/config.hpp for
# an architecture below squeeze's minimum (sm_75) and fails unless nvcc stops with squeeze's
# own message (not with an undefined intrinsic, and not by compiling).
#   cmake -DNVCC=<nvcc> -DINCLUDE=<include dir> -DWORK=<scratch dir> -P check_min_arch.cmake
foreach(var IN ITEMS NVCC INCLUDE WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_min_arch.cmake: -D${var}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK}")
file(WRITE "${WORK}/below_min_arch.cu"
  "#include <squeeze/core/config.hpp>\n__global__ void kernel(int* out) { *out = 1; }\n")
execute_process(
  COMMAND "${NVCC}" -std=c++20 -arch=sm_75 "-I${INCLUDE}" -c "${WORK}/below_min_arch.cu"
          -o "${WORK}/below_min_arch.o"
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "a kernel built for sm_75 compiled: squeeze's minimum is not enforced")
endif()
if(NOT "${out}${err}" MATCHES "squeeze needs compute capability 8\\.0 or newer")
  message(FATAL_ERROR "nvcc failed for sm_75 without squeeze's message:\n${out}${err}")
endif()
message(STATUS "sm_75 refused with squeeze's message")
