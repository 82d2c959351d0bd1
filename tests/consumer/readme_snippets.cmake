# SPDX-License-Identifier: Apache-2.0
# squeeze_readme_snippets(<markdown> <out_dir> <names_var>)
#
# Extracts the C++ code blocks of the Markdown files <markdown> (one path or a list: README.md,
# the guides) so that they can be compiled as written. Every ```cpp block must follow a line
# `<!-- snippet: <name> -->` (names: lower case, digits, underscores; each used once across
# all the files), or configuration stops: a block nobody compiles can drift.
# Each block becomes two files in <out_dir>:
#
#   <name>.head.inc   the block's leading #include lines and namespace aliases
#                     (`namespace x = squeeze::x;`), for file scope
#   <name>.body.inc   the rest of the block
#
# each starting with a #line directive, so the compiler reports errors at the Markdown file's
# own lines. A harness (tests/consumer/snippets/<family>.cu) includes the head at file scope,
# declares what the block uses, and includes the body where it belongs: inside a function
# for statements, at file scope for a kernel. <names_var> receives the names, in the order of
# the files and of the blocks in each.
function(squeeze_readme_snippets markdown out_dir names_var)
  file(MAKE_DIRECTORY "${out_dir}")
  set(names "")
  foreach(readme IN LISTS markdown)
    squeeze_readme_snippets_of_file("${readme}" "${out_dir}" names)
  endforeach()
  set(${names_var} "${names}" PARENT_SCOPE)
endfunction()

# Appends the names of <readme>'s blocks to <names_var> (which holds those of earlier files).
function(squeeze_readme_snippets_of_file readme out_dir names_var)
  file(READ "${readme}" text)
  if(text MATCHES "\n```(c\\+\\+|cxx|cu|cuda|hpp|cuh|h)\n")
    message(FATAL_ERROR "${readme}: a ```${CMAKE_MATCH_1} block: C++ blocks are ```cpp, so "
                        "that they are compiled")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${readme}")
  set(names "${${names_var}}")
  set(line 1)  # README line where `text` starts
  set(fence "```cpp\n")
  while(TRUE)
    string(FIND "${text}" "${fence}" start)
    if(start EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${start} before)
    string(REGEX MATCHALL "\n" newlines "${before}")
    list(LENGTH newlines skipped)
    math(EXPR fence_line "${line} + ${skipped}")
    if(NOT before MATCHES "<!-- snippet: ([a-z0-9_]+) -->\n$")
      message(FATAL_ERROR "${readme}:${fence_line}: a ```cpp block without a line "
                          "`<!-- snippet: <name> -->` right before it; name it, and include it "
                          "in a harness of tests/consumer/snippets/ (<family>.cu)")
    endif()
    set(name "${CMAKE_MATCH_1}")
    if(name IN_LIST names)
      message(FATAL_ERROR "${readme}:${fence_line}: snippet name '${name}' used twice "
                          "(names are unique across README.md and docs/guides)")
    endif()
    list(APPEND names "${name}")

    # The block: from the line after the fence to the closing ``` line.
    string(LENGTH "${fence}" fence_length)
    math(EXPR block_start "${start} + ${fence_length}")
    string(SUBSTRING "${text}" ${block_start} -1 text)
    math(EXPR block_line "${fence_line} + 1")
    string(FIND "${text}" "\n```" end)
    if(NOT text MATCHES "^```" AND end EQUAL -1)
      message(FATAL_ERROR "${readme}:${fence_line}: snippet '${name}' is never closed")
    endif()
    if(text MATCHES "^```")  # an empty block
      set(block "")
      set(rest_start 0)
    else()
      math(EXPR block_length "${end} + 1")
      string(SUBSTRING "${text}" 0 ${block_length} block)
      math(EXPR rest_start "${end} + 1")
    endif()
    string(SUBSTRING "${text}" ${rest_start} -1 text)
    string(REGEX MATCHALL "\n" newlines "${block}")
    list(LENGTH newlines block_lines)
    math(EXPR line "${block_line} + ${block_lines}")

    # Head: the leading #include lines, namespace aliases and blank lines.
    set(head "")
    set(body "${block}")
    while(body MATCHES "^(#include [^\n]*\n|namespace [a-z0-9_]+ = [a-z0-9_:]+;\n|\n)")
      string(APPEND head "${CMAKE_MATCH_1}")
      string(LENGTH "${CMAKE_MATCH_1}" head_length)
      string(SUBSTRING "${body}" ${head_length} -1 body)
    endwhile()
    string(REGEX MATCHALL "\n" newlines "${head}")
    list(LENGTH newlines head_lines)
    set(head_line ${block_line})
    math(EXPR body_line "${block_line} + ${head_lines}")
    # Written only when changed, so that an unchanged block is not compiled again.
    foreach(part IN ITEMS head body)
      file(WRITE "${out_dir}/${name}.${part}.inc.new"
           "#line ${${part}_line} \"${readme}\"\n${${part}}")
      file(COPY_FILE "${out_dir}/${name}.${part}.inc.new" "${out_dir}/${name}.${part}.inc"
           ONLY_IF_DIFFERENT)
      file(REMOVE "${out_dir}/${name}.${part}.inc.new")
    endforeach()
  endwhile()
  set(${names_var} "${names}" PARENT_SCOPE)
endfunction()
