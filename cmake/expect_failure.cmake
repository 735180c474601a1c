# expect_failure.cmake: runs a command that MUST fail, and fail for the right reason.
# Used by the ctest test sim_canary_must_be_caught: the canary build (LANEQ_CANARY=1)
# breaks an invariant on purpose, and the simulation's checker must catch it.
#
#   cmake -DCMD=<exe> [-DARGS=<arg;arg>] -DEXPECT=<text> [-DTIMEOUT=<seconds>] -P expect_failure.cmake
#
# Passes only if the command exits non-zero (or aborts) AND its combined
# stdout+stderr contains EXPECT. Anything else (exit 0, a timeout, a failure
# without the expected text) fails, so a checker that went blind is noticed.

cmake_policy(VERSION 3.22)

if(NOT DEFINED CMD OR CMD STREQUAL "")
  message(FATAL_ERROR "expect_failure: CMD is not set")
endif()
if(NOT DEFINED EXPECT OR EXPECT STREQUAL "")
  message(FATAL_ERROR "expect_failure: EXPECT is not set")
endif()
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 270)
endif()

execute_process(
  COMMAND "${CMD}" ${ARGS}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out        # same variable: stdout and stderr merged in order
  TIMEOUT ${TIMEOUT})

string(FIND "${out}" "${EXPECT}" found)

# rc is an exit code, or a text such as "Child aborted" / "Process terminated due to timeout".
set(failed TRUE)
if(rc STREQUAL "0")
  set(failed FALSE)
endif()
set(timed_out FALSE)
if(rc MATCHES "timeout")
  set(timed_out TRUE)
endif()

# Keep the log readable: show the last 8 kB of output.
string(LENGTH "${out}" len)
if(len GREATER 8192)
  math(EXPR start "${len} - 8192")
  string(SUBSTRING "${out}" ${start} -1 tail)
  set(tail "[... ${start} bytes cut ...]\n${tail}")
else()
  set(tail "${out}")
endif()

if(failed AND NOT timed_out AND found GREATER_EQUAL 0)
  message(STATUS "expect_failure: OK: command failed (${rc}) and printed \"${EXPECT}\"")
  return()
endif()

message("----- output of: ${CMD} ${ARGS} -----\n${tail}\n----- end of output -----")
if(timed_out)
  message(FATAL_ERROR "expect_failure: command timed out after ${TIMEOUT}s (${rc})")
elseif(NOT failed)
  message(FATAL_ERROR "expect_failure: command exited 0, but it must fail: the canary was NOT caught")
else()
  message(FATAL_ERROR "expect_failure: command failed (${rc}) but did not print \"${EXPECT}\"")
endif()
