# SPDX-License-Identifier: Apache-2.0
# squeeze_comm.cmake: the libraries coll::'s transports need, as targets a program links.
# squeeze::squeeze itself stays header-only and links neither: a program links the transport
# it uses.
#
#   squeeze::nccl   NCCL (nccl.h and libnccl): under NCCL_ROOT (a CMake or environment
#                   variable) when set, else the CUDA toolkit's copy, else the system's
#   squeeze::mpi    MPI for C++ (MPI::MPI_CXX from find_package(MPI); coll's MPI transport
#                   hands device pointers to MPI only when it is CUDA-aware, and stages
#                   through host memory otherwise)
#
# Each target is defined only when its library is found; SQUEEZE_HAVE_NCCL and
# SQUEEZE_HAVE_MPI say which were. CUDAToolkit must be found first. MPI is looked for only
# where the CXX language is enabled (FindMPI needs it).
#
# Included by squeeze's own CMakeLists.txt, with _squeeze_comm_scope set to GLOBAL so that a
# project that adds squeeze with add_subdirectory or FetchContent sees the targets, and by
# the installed squeezeConfig.cmake, where the targets belong to the directory that called
# find_package(squeeze) (find_package(squeeze CONFIG REQUIRED COMPONENTS nccl mpi) fails
# when one is missing).
if(NOT TARGET squeeze::nccl)
  find_path(SQUEEZE_NCCL_INCLUDE_DIR nccl.h
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(SQUEEZE_NCCL_LIBRARY nccl
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib"
    PATH_SUFFIXES lib lib64)
  if(SQUEEZE_NCCL_INCLUDE_DIR AND SQUEEZE_NCCL_LIBRARY)
    add_library(squeeze::nccl UNKNOWN IMPORTED ${_squeeze_comm_scope})
    set_target_properties(squeeze::nccl PROPERTIES
      IMPORTED_LOCATION "${SQUEEZE_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${SQUEEZE_NCCL_INCLUDE_DIR}")
  endif()
endif()

if(NOT TARGET squeeze::mpi)
  get_property(_squeeze_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(CXX IN_LIST _squeeze_languages)
    find_package(MPI COMPONENTS CXX QUIET)
  endif()
  unset(_squeeze_languages)
  # FindMPI defines MPI::MPI_CXX even where it finds no MPI (CMake 3.25): MPI_CXX_FOUND says.
  if(MPI_CXX_FOUND AND TARGET MPI::MPI_CXX)
    add_library(squeeze::mpi INTERFACE IMPORTED ${_squeeze_comm_scope})
    set_property(TARGET squeeze::mpi PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_CXX)
  endif()
endif()

if(TARGET squeeze::nccl)
  set(SQUEEZE_HAVE_NCCL ON)
else()
  set(SQUEEZE_HAVE_NCCL OFF)
endif()
if(TARGET squeeze::mpi)
  set(SQUEEZE_HAVE_MPI ON)
else()
  set(SQUEEZE_HAVE_MPI OFF)
endif()
