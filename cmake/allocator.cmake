# allocator.cmake: LANEQ_JEMALLOC=ON links every executable against jemalloc (Debian package
# libjemalloc-dev) instead of glibc malloc.
#
# Why: the broker allocates and frees small objects (actor messages, envelopes, store batches) on
# several threads at a high rate. With glibc malloc, the 1,000-group durable benchmark spent about a
# third of its CPU in malloc/free, arena trimming and the page faults that follow
# (docs/decisions/0010-performance-history.md); jemalloc cut the CPU per message from about 40 to 27 us and raised the
# rate by about 40%. RocksDB recommends jemalloc for the same reasons.
#
# Off under the sanitizers (ASan and TSan bring their own allocators: with TSan, jemalloc's decay
# settings would do nothing and the memory tests that rely on them would measure TSan's) and in
# the fuzz preset.

if(LANEQ_SANITIZE OR LANEQ_TSAN OR LANEQ_FUZZ)
  set(_laneq_jemalloc_default OFF)
else()
  set(_laneq_jemalloc_default ON)
endif()
option(LANEQ_JEMALLOC "Link executables against jemalloc (libjemalloc-dev)" ${_laneq_jemalloc_default})

if(LANEQ_JEMALLOC)
  if(LANEQ_SANITIZE OR LANEQ_TSAN)
    message(FATAL_ERROR "LANEQ_JEMALLOC cannot be combined with a sanitizer (it replaces malloc)")
  endif()
  find_library(LANEQ_JEMALLOC_LIBRARY NAMES jemalloc)
  if(NOT LANEQ_JEMALLOC_LIBRARY)
    message(FATAL_ERROR "LANEQ_JEMALLOC=ON but libjemalloc was not found: "
                        "apt-get install libjemalloc-dev (scripts/install-deps.sh), "
                        "or configure with -DLANEQ_JEMALLOC=OFF")
  endif()
  message(STATUS "laneq: allocator jemalloc (${LANEQ_JEMALLOC_LIBRARY})")
else()
  message(STATUS "laneq: allocator glibc malloc")
endif()
