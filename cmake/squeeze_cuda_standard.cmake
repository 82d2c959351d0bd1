# SPDX-License-Identifier: Apache-2.0
# squeeze_require_cuda_cxx20(<target> BUILD|INSTALLED)
#
# Makes CUDA sources that use <target> compile as C++20. CMake learned the cuda_std_20
# feature for nvcc only after 3.25; older versions get -std=c++20 directly. With BUILD the
# requirement applies in this build tree only (the installed config makes its own choice
# with the consumer's CMake).
function(squeeze_require_cuda_cxx20 target mode)
  if(CMAKE_CUDA_COMPILE_FEATURES MATCHES "cuda_std_20")
    set(requirement INTERFACE_COMPILE_FEATURES cuda_std_20)
  else()
    set(requirement INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>")
  endif()
  list(GET requirement 0 property)
  list(GET requirement 1 value)
  if(mode STREQUAL "BUILD")
    set(value "$<BUILD_INTERFACE:${value}>")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY ${property} "${value}")
endfunction()

# squeeze_use_hopper_features(<target>)
#
# Builds <target>'s CUDA code for sm_90a instead of sm_90 wherever the architecture list
# names 90: the arch-specific target is what enables wgmma (ROAST-MM's tensor-core path).
# Other architectures are kept; a binary built without 90a still runs everywhere through
# the portable kernels.
function(squeeze_use_hopper_features target)
  set(archs "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "^90($|-)" "90a\\1" arch "${arch}")
    list(APPEND archs "${arch}")
  endforeach()
  set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES ${archs})
endfunction()
