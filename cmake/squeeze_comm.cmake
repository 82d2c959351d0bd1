# What coll::'s transports link against, found for squeeze's own tests, benches and examples
# (the library target stays header-only: a program links the transport it uses).
#
#   squeeze::nccl   imported target for NCCL (nccl.h, libnccl), when found: the CUDA
#                   toolkit's copy first, then NCCL_ROOT / the system
#   MPI::MPI_CXX    from find_package(MPI), when found (CUDA-aware MPI is needed to run)
#
# SQUEEZE_HAVE_NCCL and SQUEEZE_HAVE_MPI say which were found.
if(NOT TARGET squeeze::nccl)
  find_path(SQUEEZE_NCCL_INCLUDE_DIR nccl.h
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(SQUEEZE_NCCL_LIBRARY nccl
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib"
    PATH_SUFFIXES lib lib64)
  if(SQUEEZE_NCCL_INCLUDE_DIR AND SQUEEZE_NCCL_LIBRARY)
    add_library(squeeze::nccl UNKNOWN IMPORTED)
    set_target_properties(squeeze::nccl PROPERTIES
      IMPORTED_LOCATION "${SQUEEZE_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${SQUEEZE_NCCL_INCLUDE_DIR}")
  endif()
endif()
if(TARGET squeeze::nccl)
  set(SQUEEZE_HAVE_NCCL ON)
else()
  set(SQUEEZE_HAVE_NCCL OFF)
  message(STATUS "squeeze: NCCL not found: coll's NCCL tests, bench and example are not built")
endif()

find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  set(SQUEEZE_HAVE_MPI ON)
  message(STATUS "squeeze: MPI found (${MPIEXEC_EXECUTABLE}): coll's MPI tests and bench are built")
else()
  set(SQUEEZE_HAVE_MPI OFF)
  message(STATUS "squeeze: MPI not found: coll's MPI transport is not tested or benchmarked here")
endif()
