# caf.cmake: imported targets CAF::core, CAF::io and CAF::openssl for Debian's CAF 0.17.6.
# Debian's libcaf-dev ships no CMake config package and no .pc file, so the
# targets are made by hand (docs: /work/shared/TOOLCHAIN.md section 2).
# Requires Threads::Threads (find_package(Threads) before including this file).

find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY NAMES caf_core REQUIRED)
find_library(CAF_IO_LIBRARY NAMES caf_io REQUIRED)
# CAF's TLS transport for remote actors (caf/openssl/*.hpp, docs/caf-client.md "TLS"), from
# libcaf-dev as well.
find_library(CAF_OPENSSL_LIBRARY NAMES caf_openssl REQUIRED)

file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_ver_line
     REGEX "^#define CAF_VERSION [0-9]+$")
string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+)$" "\\1" CAF_VERSION_NUM "${_caf_ver_line}")
if(NOT CAF_VERSION_NUM MATCHES "^[0-9]+$")
  message(FATAL_ERROR "could not read CAF_VERSION from ${CAF_INCLUDE_DIR}/caf/config.hpp")
endif()
if(CAF_VERSION_NUM LESS 1706 OR CAF_VERSION_NUM GREATER_EQUAL 1800)
  message(FATAL_ERROR "need CAF 0.17.x (>= 0.17.6), found CAF_VERSION=${CAF_VERSION_NUM}")
endif()
message(STATUS "CAF ${CAF_VERSION_NUM}: ${CAF_CORE_LIBRARY}")

if(NOT TARGET CAF::core)
  add_library(CAF::core SHARED IMPORTED)
  # Imported targets' include dirs are SYSTEM by default; state it explicitly as
  # well so CAF headers never trip our -Werror warnings.
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
if(NOT TARGET CAF::io)
  add_library(CAF::io SHARED IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()
if(NOT TARGET CAF::openssl)
  if(NOT TARGET OpenSSL::SSL)
    find_package(OpenSSL 3 REQUIRED COMPONENTS SSL Crypto)
  endif()
  add_library(CAF::openssl SHARED IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES
    IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
    INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL;OpenSSL::Crypto")
endif()
