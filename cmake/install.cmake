# `cmake --install build --prefix P`: what an NPU project builds its checked-in
# models/<id>/ against.
#
#   bin/gen-model, bin/phase0 (with this tree's models)
#   lib/libgm_*.a (the runtime by concern, and libgm_phase0.a), lib/libgenmodel.so.<ABI> (all of it, shared;
#     its soname follows GM_RUNTIME_ABI, the contract between the runtime and generated code) and libgenmodel.a
#     (all of it, static)
#   include/gm/*.h
#   lib/pkgconfig/genmodel.pc, genmodel-phase0.pc (phase0 for a project's models with any compiler)
#   lib/cmake/GenModel/: GenModelConfig.cmake, its version file, the exported targets
#     (GenModel::runtime, GenModel::runtime_shared, GenModel::gm_core, ...) and
#     gm_model_library() and gm_phase0_program() from cmake/models.cmake
#   share/gen-model/phase0.c and include/gen-model/ (its headers), for gm_phase0_program()
#   share/man/man1/gen-model.1, phase0.1 (from the programs' own --help)
#   share/bash-completion/completions/gen-model, phase0
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
find_package(Threads REQUIRED)

# read at configure time, so a bump of GM_RUNTIME_ABI reconfigures: the soname follows it in every build
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/runtime/core/include/gm/status.h)
file(STRINGS ${PROJECT_SOURCE_DIR}/runtime/core/include/gm/status.h abi_line REGEX "^#define GM_RUNTIME_ABI ")
string(REGEX REPLACE "^#define GM_RUNTIME_ABI ([0-9]+).*" "\\1" GM_ABI "${abi_line}")

set(runtime_libs gm_core gm_tensors gm_kernels gm_model gm_runner gm_tokenizer)
foreach(l ${runtime_libs})
  set_target_properties(${l} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endforeach()
set_target_properties(gm_runtime PROPERTIES EXPORT_NAME runtime)

# every runtime object in one shared library
set(runtime_objects)
foreach(l ${runtime_libs})
  list(APPEND runtime_objects $<TARGET_OBJECTS:${l}>)
endforeach()
add_library(gm_runtime_shared SHARED ${runtime_objects})
target_link_libraries(gm_runtime_shared PRIVATE Threads::Threads m PkgConfig::CJSON PkgConfig::ONIG PkgConfig::UTF8PROC)
target_link_options(gm_runtime_shared PRIVATE -Wl,--no-undefined -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/genmodel.map)
set_target_properties(gm_runtime_shared PROPERTIES LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/genmodel.map)
# the headers: the install's include folder, or in the build (a project that has this tree as its subproject) each
# runtime folder's, as the static libraries give them
set(runtime_includes)
foreach(d core tensors kernels model runner tokenizer)
  list(APPEND runtime_includes ${PROJECT_SOURCE_DIR}/runtime/${d}/include)
endforeach()
target_include_directories(gm_runtime_shared INTERFACE "$<BUILD_INTERFACE:${runtime_includes}>"
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# the file named by the runtime ABI too (libgenmodel.so.5.0.0), so that installing another ABI puts its library
# beside this one: named by the project's version, every ABI wrote one file and an older link led to the newer code
set_target_properties(gm_runtime_shared PROPERTIES OUTPUT_NAME genmodel VERSION ${GM_ABI}.0.0
                      SOVERSION ${GM_ABI} EXPORT_NAME runtime_shared)

# and in one static library, libgenmodel.a, for a program that takes nothing of the runtime from the target board:
# -Wl,-Bstatic -lgenmodel -Wl,-Bdynamic (-lgenmodel alone takes the shared one; Debian's cJSON and Oniguruma are
# shared only, so cc -static needs builds of its own of those)
add_library(gm_runtime_static STATIC ${runtime_objects})
set_target_properties(gm_runtime_static PROPERTIES OUTPUT_NAME genmodel EXPORT_NAME runtime_static)
target_include_directories(gm_runtime_static INTERFACE "$<BUILD_INTERFACE:${runtime_includes}>"
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(gm_runtime_static INTERFACE Threads::Threads m PkgConfig::CJSON PkgConfig::ONIG PkgConfig::UTF8PROC)

set_target_properties(gm_phase0 PROPERTIES POSITION_INDEPENDENT_CODE ON)

# the names the install exports them by (GenModel::runtime, GenModel::gm_core, GenModel::phase0_lib, ...), in the
# build too, so that a project links the same names whether it finds an installed gen-model or adds this tree as its
# subproject, and gm_model_library() and gm_phase0_program() link them both ways
foreach(t ${runtime_libs} gm_runtime gm_runtime_shared gm_runtime_static gm_phase0)
  get_target_property(name ${t} EXPORT_NAME)
  if(NOT name)
    set(name ${t})
  endif()
  add_library(GenModel::${name} ALIAS ${t})
endforeach()
if(NOT GM_INSTALL)
  # nothing installs them (a subproject): `all` builds of them only what the project's own targets link
  set_target_properties(${runtime_libs} gm_runtime_shared gm_runtime_static gm_phase0 PROPERTIES EXCLUDE_FROM_ALL ON)
  return()
endif()

if(GM_BUILD_PROGRAMS)
  install(TARGETS gen-model phase0 RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(TARGETS ${runtime_libs} gm_runtime gm_runtime_shared gm_runtime_static gm_phase0 EXPORT GenModelTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(inc ${runtime_includes}) # (gm/ of each runtime folder's include/)
  install(DIRECTORY ${inc}/gm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
# phase0 for a downstream project's models: its source, and the headers it and libgm_phase0 use
install(FILES ${PROJECT_SOURCE_DIR}/phase0/phase0.c DESTINATION ${CMAKE_INSTALL_DATADIR}/gen-model)
install(FILES ${PROJECT_SOURCE_DIR}/phase0/record.h ${PROJECT_SOURCE_DIR}/phase0/prompt_file.h ${PROJECT_SOURCE_DIR}/phase0/config_check.h
              ${PROJECT_SOURCE_DIR}/phase0/verify/verify.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gen-model)
install(EXPORT GenModelTargets NAMESPACE GenModel:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/GenModel)

# phase0.c for gm_phase0_program(), found from GenModelConfig.cmake's own folder however deep CMAKE_INSTALL_LIBDIR is
# (lib/x86_64-linux-gnu: GNUInstallDirs' choice for --prefix /usr on Debian) and wherever CMAKE_INSTALL_DATADIR is
set(GM_PHASE0_SOURCE_INSTALLED ${CMAKE_INSTALL_DATADIR}/gen-model/phase0.c)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/GenModelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/GenModelConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/GenModel
  PATH_VARS GM_PHASE0_SOURCE_INSTALLED)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/GenModelConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/GenModelConfig.cmake ${PROJECT_BINARY_DIR}/GenModelConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/models.cmake ${PROJECT_SOURCE_DIR}/cmake/registry_table.c.in
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/GenModel)

# the .pc files find the prefix from their own folder (${pcfiledir}), as many levels up as CMAKE_INSTALL_LIBDIR/pkgconfig
# is deep (two for lib/, three for lib/x86_64-linux-gnu/), so that the install works under any --prefix; the folders
# GNUInstallDirs was given as absolute paths stay as they are
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" up "${up}")
  set(GM_PC_PREFIX "\${pcfiledir}/${up}")
endif()
foreach(d LIBDIR INCLUDEDIR DATADIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(GM_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(GM_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/genmodel.pc.in ${PROJECT_BINARY_DIR}/genmodel.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/genmodel-phase0.pc.in ${PROJECT_BINARY_DIR}/genmodel-phase0.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/genmodel.pc ${PROJECT_BINARY_DIR}/genmodel-phase0.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(GM_BUILD_PROGRAMS)
  # man pages from the programs' --help: one text, so the two cannot drift
  foreach(prog gen-model phase0)
    add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man/${prog}.1
      COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:${prog}> -DNAME=${prog} -DVERSION=${PROJECT_VERSION}
              -DOUT=${PROJECT_BINARY_DIR}/man/${prog}.1 -P ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake
      DEPENDS ${prog} ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake
      COMMENT "man page ${prog}(1) from ${prog} --help" VERBATIM)
    list(APPEND man_pages ${PROJECT_BINARY_DIR}/man/${prog}.1)
  endforeach()
  add_custom_target(man ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

  # bash completion: subcommands, options (read from --help) and, for phase0, the built-in model ids (--list)
  install(FILES ${PROJECT_SOURCE_DIR}/completions/gen-model.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
          RENAME gen-model)
  install(FILES ${PROJECT_SOURCE_DIR}/completions/gen-model.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
          RENAME phase0)
endif()

# the package of gen-model's own build: CPack writes its configuration into the top-level build folder, which in a
# subproject is the other project's, with its own CPack configuration there
if(NOT PROJECT_IS_TOP_LEVEL)
  return()
endif()
# cpack -G DEB (in the build folder): a .deb whose Depends dpkg-shlibdeps reads off the binaries
set(CPACK_PACKAGE_NAME gen-model)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gen-model maintainers <gen-model@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Phase 0 of an NPU deployment for Hugging Face decoder LLMs: scaffold and bf16 baseline")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# what its CMake package and genmodel.pc ask for (pkg_check_modules, Requires.private) and the static libraries link
set(CPACK_DEBIAN_PACKAGE_DEPENDS "pkg-config, libcjson-dev, libonig-dev, libutf8proc-dev")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_GENERATOR DEB)
include(CPack)
