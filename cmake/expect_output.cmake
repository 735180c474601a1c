# expect_output.cmake: runs a command that MUST succeed and print exactly the expected line.
# Used by the ctest tests version.laneqd_prints_the_project_version and
# version.laneq_prints_the_project_version (`--version`, CMakeLists.txt).
#
#   cmake -DCMD=<exe> [-DARGS=<arg;arg>] -DEXPECT=<line> [-DTIMEOUT=<seconds>] -P expect_output.cmake
#
# Passes only if the command exits 0, prints EXPECT and a newline on stdout and nothing else,
# and nothing on stderr (ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit code).

cmake_policy(VERSION 3.22)

if(NOT DEFINED CMD OR CMD STREQUAL "" OR NOT DEFINED EXPECT OR EXPECT STREQUAL "")
  message(FATAL_ERROR "expect_output: CMD and EXPECT must be set")
endif()
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 60)
endif()

execute_process(
  COMMAND "${CMD}" ${ARGS}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT ${TIMEOUT})

if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "expect_output: ${CMD} ${ARGS} exited ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT out STREQUAL "${EXPECT}\n")
  message(FATAL_ERROR "expect_output: ${CMD} ${ARGS} printed \"${out}\", expected \"${EXPECT}\\n\"")
endif()
if(NOT err STREQUAL "")
  message(FATAL_ERROR "expect_output: ${CMD} ${ARGS} wrote to stderr: ${err}")
endif()
message(STATUS "expect_output: OK: ${CMD} ${ARGS} printed \"${EXPECT}\" and exited 0")
