# SPDX-License-Identifier: Apache-2.0
# Runs Doxygen and counts its warnings (cmake/squeeze_docs.cmake calls it for the docs target
# and the ctest test docs):
#
#   cmake -D DOXYGEN=<doxygen> -D DOXYFILE=<Doxyfile> -D LOG=<its WARN_LOGFILE>
#         [-D MAX_WARNINGS=<n>] -P cmake/squeeze_docs_run.cmake
#
# Prints the count and the ten most frequent kinds of warning. With MAX_WARNINGS >= 0, fails
# when the log holds more warnings than that, and says so when it holds fewer (the budget
# should come down to the new count).
foreach(var DOXYGEN DOXYFILE LOG)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "squeeze_docs_run.cmake: -D ${var}=... is required")
  endif()
endforeach()
if(NOT DEFINED MAX_WARNINGS)
  set(MAX_WARNINGS -1)
endif()

file(REMOVE "${LOG}")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "doxygen ${DOXYFILE} failed (exit ${rc})")
endif()
if(NOT EXISTS "${LOG}")
  message(FATAL_ERROR "doxygen wrote no warning log at ${LOG} (WARN_LOGFILE in ${DOXYFILE})")
endif()

file(STRINGS "${LOG}" warnings REGEX "warning: ")
list(LENGTH warnings count)

# Kinds: "Member <name> (<kind>) of <container kind>", "Compound", or the message itself.
set(kinds "")
foreach(line IN LISTS warnings)
  if(line MATCHES "warning: Member .* \\(([a-z]+)\\) of ([a-z]+) ")
    list(APPEND kinds "undocumented ${CMAKE_MATCH_1} of a ${CMAKE_MATCH_2}")
  elseif(line MATCHES "warning: Compound ")
    list(APPEND kinds "undocumented class or struct")
  elseif(line MATCHES "warning: (.*)$")
    list(APPEND kinds "${CMAKE_MATCH_1}")
  endif()
endforeach()
set(summary "")
list(REMOVE_DUPLICATES kinds)
foreach(kind IN LISTS kinds)
  set(n 0)
  foreach(line IN LISTS warnings)
    if(kind MATCHES "^undocumented ([a-z]+) of a ([a-z]+)$")
      if(line MATCHES "\\(${CMAKE_MATCH_1}\\) of ${CMAKE_MATCH_2} ")
        math(EXPR n "${n} + 1")
      endif()
    elseif(kind STREQUAL "undocumented class or struct")
      if(line MATCHES "warning: Compound ")
        math(EXPR n "${n} + 1")
      endif()
    else()
      string(FIND "${line}" "${kind}" at)
      if(at GREATER_EQUAL 0)
        math(EXPR n "${n} + 1")
      endif()
    endif()
  endforeach()
  # zero-padded so that a plain sort orders by count
  string(LENGTH "${n}" digits)
  string(REPEAT "0" "6" pad)
  math(EXPR keep "6 - ${digits}")
  string(SUBSTRING "${pad}" 0 ${keep} pad)
  list(APPEND summary "${pad}${n} ${kind}")
endforeach()
list(SORT summary ORDER DESCENDING)
list(SUBLIST summary 0 10 top)
set(lines "")
foreach(entry IN LISTS top)
  string(REGEX REPLACE "^0*([0-9]+) " "\\1  " entry "${entry}")
  string(APPEND lines "\n  ${entry}")
endforeach()

message(STATUS "doxygen: ${count} warnings (${LOG})${lines}")
if(MAX_WARNINGS GREATER_EQUAL 0)
  if(count GREATER MAX_WARNINGS)
    message(FATAL_ERROR
      "doxygen: ${count} warnings, more than the budget of ${MAX_WARNINGS} "
      "(SQUEEZE_DOCS_MAX_WARNINGS, cmake/squeeze_docs.cmake). Document the public names the "
      "log names (a /// comment before each, ///< after a member), or move internals to a "
      "detail namespace.")
  elseif(count LESS MAX_WARNINGS)
    message(STATUS
      "doxygen: ${count} warnings, under the budget of ${MAX_WARNINGS}: lower "
      "SQUEEZE_DOCS_MAX_WARNINGS in cmake/squeeze_docs.cmake to ${count}.")
  endif()
endif()
