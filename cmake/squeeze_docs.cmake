# SPDX-License-Identifier: Apache-2.0
# squeeze's API reference: the `docs` target runs Doxygen over the public headers
# (include/squeeze, detail/ left out; docs/doxygen/Doxyfile.in) into <build>/docs/html, with
# every warning (undocumented public names first of all) written to
# <build>/docs/doxygen_warnings.log. The target exists only where Doxygen is found.
#
# With tests on, the ctest test `docs` (label docs) runs the same build and fails when the
# log holds more warnings than SQUEEZE_DOCS_MAX_WARNINGS, the committed budget below: a
# change that adds an undocumented public name fails it; a change that documents some should
# lower the budget to the count the test prints.
#
#   cmake --build build/test --target docs        # build/test/docs/html/index.html
#   ctest --test-dir build/test -L docs           # the warning budget
option(SQUEEZE_BUILD_DOCS "Add the docs target (Doxygen API reference) when Doxygen is found"
       ${PROJECT_IS_TOP_LEVEL})
if(NOT SQUEEZE_BUILD_DOCS)
  return()
endif()
find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "squeeze: Doxygen not found; no docs target (apt-get install doxygen)")
  return()
endif()

# The budget: warnings the public headers may produce (Doxygen 1.9.4, Debian 12). A plain
# variable, not a cache entry, so that a build directory always tests the committed number.
set(SQUEEZE_DOCS_MAX_WARNINGS 75)

set(SQUEEZE_DOCS_OUTPUT "${PROJECT_BINARY_DIR}/docs")
set(SQUEEZE_DOCS_WARNINGS "${SQUEEZE_DOCS_OUTPUT}/doxygen_warnings.log")
configure_file("${PROJECT_SOURCE_DIR}/docs/doxygen/Doxyfile.in" "${SQUEEZE_DOCS_OUTPUT}/Doxyfile"
               @ONLY)
set(squeeze_docs_run
    "${CMAKE_COMMAND}" -D "DOXYGEN=${DOXYGEN_EXECUTABLE}"
    -D "DOXYFILE=${SQUEEZE_DOCS_OUTPUT}/Doxyfile" -D "LOG=${SQUEEZE_DOCS_WARNINGS}")
file(GLOB_RECURSE squeeze_docs_inputs CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/include/squeeze/*.hpp" "${PROJECT_SOURCE_DIR}/include/squeeze/*.cuh"
     "${PROJECT_SOURCE_DIR}/docs/doxygen/*.dox")

# The target reports the count and never fails on warnings: the test keeps the budget.
add_custom_target(docs
  COMMAND ${squeeze_docs_run} -D MAX_WARNINGS=-1 -P "${PROJECT_SOURCE_DIR}/cmake/squeeze_docs_run.cmake"
  DEPENDS ${squeeze_docs_inputs} "${SQUEEZE_DOCS_OUTPUT}/Doxyfile"
  BYPRODUCTS "${SQUEEZE_DOCS_WARNINGS}"
  WORKING_DIRECTORY "${SQUEEZE_DOCS_OUTPUT}"
  COMMENT "squeeze API reference (Doxygen): ${SQUEEZE_DOCS_OUTPUT}/html/index.html"
  VERBATIM)

if(SQUEEZE_BUILD_TESTS)
  add_test(NAME docs
    COMMAND ${squeeze_docs_run} -D "MAX_WARNINGS=${SQUEEZE_DOCS_MAX_WARNINGS}"
            -P "${PROJECT_SOURCE_DIR}/cmake/squeeze_docs_run.cmake"
    WORKING_DIRECTORY "${SQUEEZE_DOCS_OUTPUT}")
  set_tests_properties(docs PROPERTIES LABELS docs TIMEOUT 300)
endif()
