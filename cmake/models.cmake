# gm_model_library(TARGET table ROOT IDS...): a static library of the generated
# sources of every model ROOT/<id>/ (compiled with -pedantic on top of the
# project's warnings) plus a registry table named `table` (gm/registry.h).
function(gm_model_library target table root)
  set(ids ${ARGN})
  set(srcs)
  set(includes "")
  set(adapters "")
  set(rows "")
  foreach(id ${ids})
    string(TOUPPER ${id} ID)
    list(APPEND srcs ${root}/${id}/${id}_weights.c ${root}/${id}/${id}_cpu_helpers.c)
    string(APPEND includes "#include \"${id}/${id}_weights.h\"\n")
    string(APPEND adapters "static void ${id}_config(gm_config *out)\n{\n"
      "    const ${id}_Config c = ${id}_config_default();\n    ${id}_config_export(&c, out);\n}\n"
      "static int ${id}_load(void *w, const char *dir, gm_status *st) { return ${id}_weights_load(w, dir, st); }\n"
      "static void ${id}_free(void *w) { ${id}_weights_free(w); }\n"
      "static const gm_bf16 *${id}_find(const void *w, const char *name, const gm_tensor_spec **spec)\n"
      "{\n    return ${id}_weights_find(w, name, spec);\n}\n"
      "static void ${id}_view(const void *w, rt_layer *layers, rt_model *m) { ${id}_runner_view(w, layers, m); }\n\n")
    string(APPEND rows "    {\"${id}\", ${id}_hf_repo, ${id}_hf_commit, ${id}_config, sizeof(${id}_Weights),\n"
      "     ${id}_load, ${id}_free, ${id}_find, ${id}_rope_table, ${ID}_N_LAYERS, ${id}_view},\n")
  endforeach()
  set(registry ${CMAKE_CURRENT_BINARY_DIR}/${target}_registry.c)
  file(CONFIGURE OUTPUT ${registry} CONTENT
"/* Written by cmake/models.cmake: the models of ${target}. */
#include \"gm/registry.h\"
\n${includes}\n${adapters}const gm_model_entry ${table}[] = {\n${rows}    {0}\n};\n" @ONLY)
  add_library(${target} STATIC ${srcs} ${registry})
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -pedantic)
  target_link_libraries(${target} PUBLIC gm_model gm_runner)
endfunction()
