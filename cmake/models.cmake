# gm_model_library(TARGET table ROOT IDS...): a static library of the generated
# sources of every model ROOT/<id>/ (compiled with -pedantic on top of the
# project's warnings) and of the table named `table` that lists their registry
# entries (gm/registry.h), written from cmake/registry_table.c.in. Also
# gm_phase0_program(), below. Both serve this tree and, installed with
# find_package(GenModel), a downstream project's checked-in models/<id>/.
# the generated models and phase0 are C: a project of C++ alone names C too (project(npu C CXX))
macro(gm_need_c what)
  get_property(gm_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "C" IN_LIST gm_langs)
    message(FATAL_ERROR "${what}: the generated models are C, and this project has not enabled C: "
                        "name it in project() (project(<name> C CXX)) or call enable_language(C) first")
  endif()
endmacro()

function(gm_model_library target table root)
  gm_need_c(gm_model_library)
  set(srcs)
  set(GM_MODELS "")
  foreach(id ${ARGN})
    list(APPEND srcs ${root}/${id}/${id}_weights.c ${root}/${id}/${id}_cpu_helpers.c ${root}/${id}/${id}_registry.c)
    string(APPEND GM_MODELS "GM_MODEL(${id})\n")
  endforeach()
  set(GM_TABLE ${table})
  set(registry ${CMAKE_CURRENT_BINARY_DIR}/${target}_registry.c)
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/registry_table.c.in ${registry} @ONLY)
  add_library(${target} STATIC ${srcs} ${registry})
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -pedantic)
  # an installed gen-model's (find_package(GenModel)) or this tree's (their ALIASes, cmake/install.cmake)
  target_link_libraries(${target} PUBLIC GenModel::gm_model GenModel::gm_runner)
endfunction()

# phase0.c: where an install put it (GenModelConfig.cmake says: <datadir>/gen-model/, found from its own folder however
# deep the libdir is), or in this tree beside cmake/
# (a cache entry, so that the function sees it from any folder that calls it)
if(DEFINED GenModel_PHASE0_SOURCE)
  set(phase0_source "${GenModel_PHASE0_SOURCE}")
else()
  get_filename_component(phase0_source ${CMAKE_CURRENT_LIST_DIR}/../phase0/phase0.c ABSOLUTE)
  # and the version its --version prints, which an installed gen-model's GenModel_VERSION gives
  set(GM_TREE_VERSION ${PROJECT_VERSION} CACHE INTERNAL "gen-model's version, for gm_phase0_program()")
endif()
set(GM_PHASE0_SOURCE ${phase0_source} CACHE INTERNAL "phase0.c, for gm_phase0_program()")

# gm_phase0_program(TARGET models-library registry-table models-dir): phase0 for the models of one
# model library (gm_model_library), recording verdicts into models-dir/<id>/.
function(gm_phase0_program target lib table dir)
  gm_need_c(gm_phase0_program)
  add_executable(${target} ${GM_PHASE0_SOURCE})
  target_link_libraries(${target} PRIVATE GenModel::phase0_lib ${lib})
  # the version its --version prints: an installed gen-model's, or this tree's (which the tree's own folders have
  # already, add_compile_definitions, and a project that has the tree as its subproject has not)
  if(DEFINED GenModel_VERSION)
    target_compile_definitions(${target} PRIVATE GM_VERSION="${GenModel_VERSION}")
  else()
    target_compile_definitions(${target} PRIVATE GM_VERSION="${GM_TREE_VERSION}")
  endif()
  target_compile_definitions(${target} PRIVATE GM_PHASE0_MODELS=${table} GM_PHASE0_MODELS_DIR="${dir}")
endfunction()
