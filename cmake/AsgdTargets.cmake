# Helpers that give every asgd target the same warnings and sanitizer flags,
# per target (never through global CMAKE_CXX_FLAGS).

function(asgd_apply_flags target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # C++ sources only: nvcc takes its own flags (gpu/).
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      # GCC 12 warns falsely on std::string concatenation (GCC bug 105329).
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
    endif()
    if(ASGD_WERROR)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    endif()
  endif()
  if(ASGD_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${ASGD_SANITIZE} -fno-omit-frame-pointer -g>)
    target_link_options(${target} PRIVATE -fsanitize=${ASGD_SANITIZE})
  endif()
endfunction()

# asgd_add_library(<folder> SOURCES ... [DEPS ...])
# One library per folder: target asgd_<folder>, alias asgd::<folder>, exported
# as asgd::<folder>, public headers under <folder>/include.
function(asgd_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(asgd_${name} ${ARG_SOURCES})
  add_library(asgd::${name} ALIAS asgd_${name})
  # VERSION/SOVERSION matter with BUILD_SHARED_LIBS: 0.x releases break their ABI at each minor version.
  set_target_properties(asgd_${name} PROPERTIES EXPORT_NAME ${name}
                        OUTPUT_NAME asgd_${name} POSITION_INDEPENDENT_CODE ON
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  if(BUILD_SHARED_LIBS)  # each finds the others it needs beside it, wherever the prefix goes
    set_target_properties(asgd_${name} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
  target_include_directories(asgd_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(asgd_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  asgd_apply_flags(asgd_${name})
  if(ASGD_SANITIZE)
    # A sanitized static library needs the sanitizer's runtime wherever it is
    # linked: in this tree and in a project that uses the installed package.
    target_link_options(asgd_${name} INTERFACE -fsanitize=${ASGD_SANITIZE})
  endif()
  # One export set per library: the package config loads a component with only the packages it needs.
  install(TARGETS asgd_${name} EXPORT asgd_${name}Targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT asgd_${name}Targets NAMESPACE asgd:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/asgd)
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
