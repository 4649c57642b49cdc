# gm_model_library(TARGET table ROOT IDS...): a static library of the generated
# sources of every model ROOT/<id>/ (compiled with -pedantic on top of the
# project's warnings) and of the table named `table` that lists their registry
# entries (gm/registry.h), written from cmake/registry_table.c.in.
function(gm_model_library target table root)
  set(srcs)
  set(GM_MODELS "")
  foreach(id ${ARGN})
    list(APPEND srcs ${root}/${id}/${id}_weights.c ${root}/${id}/${id}_cpu_helpers.c ${root}/${id}/${id}_registry.c)
    string(APPEND GM_MODELS "GM_MODEL(${id})\n")
  endforeach()
  set(GM_TABLE ${table})
  set(registry ${CMAKE_CURRENT_BINARY_DIR}/${target}_registry.c)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/registry_table.c.in ${registry} @ONLY)
  add_library(${target} STATIC ${srcs} ${registry})
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -pedantic)
  target_link_libraries(${target} PUBLIC gm_model gm_runner)
endfunction()
