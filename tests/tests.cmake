# Unit tests: every tests/unit/test_*.c is its own executable and ctest case,
# run from the source tree so that it finds tests/data.
file(GLOB UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
foreach(src ${UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE speechc_compiler)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "SPEECHC_BIN=$<TARGET_FILE:speechc>")
endforeach()

# The example program, driven on the bundled tiny checkpoint: its greedy
# output must equal the HF transformers trace.
add_test(NAME example_generate
  COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
    $<TARGET_FILE:speechc> build tests/data/llm/qwen3_gqa2_hd32_tied -o $d/m.so -q; \
    out=$($<TARGET_FILE:generate> $d/m.so 0 4 134 16 186 230 101 208); echo \"$out\"; \
    test \"$out\" = '111 17 145 233 252 95 92 171 131 226 124 167 128 54 160 205'"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
include(${CMAKE_SOURCE_DIR}/tests/cli/cli.cmake)
include(${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz.cmake)
include(${CMAKE_SOURCE_DIR}/tests/emu/emu.cmake)
target_include_directories(test_avx512_simde PRIVATE ${SIMDE_INCLUDE})
# The same test again on the VNNI variant of the file (kernels_avx512vnni.c).
add_executable(test_avx512vnni_simde ${CMAKE_SOURCE_DIR}/tests/unit/test_avx512_simde.c)
target_compile_definitions(test_avx512vnni_simde PRIVATE SC_TEST_VNNI=1)
target_link_libraries(test_avx512vnni_simde PRIVATE speechc_compiler)
target_include_directories(test_avx512vnni_simde PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit ${SIMDE_INCLUDE})
add_test(NAME test_avx512vnni_simde COMMAND test_avx512vnni_simde WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# And on its 256-bit GEMV variant (kernels_avx512vnni256.c).
add_executable(test_avx512vnni256_simde ${CMAKE_SOURCE_DIR}/tests/unit/test_avx512_simde.c)
target_compile_definitions(test_avx512vnni256_simde PRIVATE SC_TEST_VNNI=1 SC_TEST_GEMV_256=1)
target_link_libraries(test_avx512vnni256_simde PRIVATE speechc_compiler)
target_include_directories(test_avx512vnni256_simde PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit ${SIMDE_INCLUDE})
add_test(NAME test_avx512vnni256_simde COMMAND test_avx512vnni256_simde WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# SPEECHC_ISA end to end: the portable kernels give the trace's tokens too,
# and an ISA that cannot run fails the session with the override named.
add_test(NAME isa_override
  COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
    $<TARGET_FILE:speechc> build tests/data/llm/qwen3_gqa2_hd32_tied -o $d/m.so -q; \
    out=$(SPEECHC_ISA=portable $<TARGET_FILE:generate> $d/m.so 0 4 134 16 186 230 101 208); \
    test \"$out\" = '111 17 145 233 252 95 92 171 131 226 124 167 128 54 160 205'; \
    if SPEECHC_ISA=sse9 $<TARGET_FILE:generate> $d/m.so 0 4 134 2>$d/err; then exit 1; fi; \
    grep \"SPEECHC_ISA: unknown ISA 'sse9'\" $d/err"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# SPEECHC_GEMV_PREFETCH and SPEECHC_GEMV_PREFETCH_CACHE end to end: every
# setting (off, on, a byte distance; into L1 or L2) gives the trace's
# tokens (a prefetch never touches the arithmetic), and bench names the
# cache it was told; any other value fails the session with the variable
# named.
add_test(NAME gemv_prefetch_override
  COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
    $<TARGET_FILE:speechc> build tests/data/llm/qwen3_gqa2_hd32_tied -o $d/m.so -q; \
    for v in 0 1 64 8192 65536; do \
      out=$(SPEECHC_GEMV_PREFETCH=$v $<TARGET_FILE:generate> $d/m.so 0 4 134 16 186 230 101 208); \
      test \"$out\" = '111 17 145 233 252 95 92 171 131 226 124 167 128 54 160 205'; \
    done; \
    for v in yes 100 32 65600 -64 4096x 2; do \
      if SPEECHC_GEMV_PREFETCH=$v $<TARGET_FILE:generate> $d/m.so 0 4 134 2>$d/err; then exit 1; fi; \
      grep \"SPEECHC_GEMV_PREFETCH: expected 0, 1 or a byte distance (a multiple of 64 from 64 to 65536), got '$v'\" $d/err; \
    done; \
    for v in l1 l2; do \
      out=$(SPEECHC_GEMV_PREFETCH_CACHE=$v $<TARGET_FILE:generate> $d/m.so 0 4 134 16 186 230 101 208); \
      test \"$out\" = '111 17 145 233 252 95 92 171 131 226 124 167 128 54 160 205'; \
      SPEECHC_GEMV_PREFETCH_CACHE=$v $<TARGET_FILE:speechc> bench $d/m.so --steps 2 --prompt 2 --probe-mb 16 > $d/b; \
      if [ \"$(uname -m)\" = x86_64 ]; then grep \"^prefetch .*; into L\${v#l}, named by SPEECHC_GEMV_PREFETCH_CACHE\" $d/b; fi; \
    done; \
    for v in L2 l3 2 yes; do \
      if SPEECHC_GEMV_PREFETCH_CACHE=$v $<TARGET_FILE:generate> $d/m.so 0 4 134 2>$d/err; then exit 1; fi; \
      grep \"SPEECHC_GEMV_PREFETCH_CACHE: expected l1 or l2, got '$v'\" $d/err; \
    done"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# The AArch64 NEON kernels, cross-compiled and run under qemu-aarch64 with
# and without dotprod (scripts/neon.sh).  Fails, never skips, when the
# cross toolchain or qemu is missing: scripts/deps.sh installs them.  Not
# in the sanitizer builds: they would only run the same script again.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND NOT SPEECHC_SANITIZE AND NOT SPEECHC_TSAN
   AND NOT SPEECHC_FUZZ)
  add_test(NAME neon_qemu COMMAND scripts/neon.sh ${CMAKE_BINARY_DIR}/neon
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
