# Fuzz targets (tests/fuzz/fuzz_*.c).  With SPEECHC_FUZZ=ON each is linked
# with libFuzzer as fuzz_<target> (run by scripts/fuzz.sh).  In every build
# each is also linked with replay.c as replay_<target>, and ctest replays
# tests/fuzz/regress/<target>/ (inputs that once crashed, plus a few seeds)
# through it: no clang or libFuzzer needed.
set(FUZZ_TARGETS safetensors checkpoint artifact tokenizer codes wav request)
foreach(t ${FUZZ_TARGETS})
  set(src ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${t}.c)
  if(SPEECHC_FUZZ)
    add_executable(fuzz_${t} ${src})
    target_link_libraries(fuzz_${t} PRIVATE speechc_compiler)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_compile_definitions(fuzz_${t} PRIVATE SPEECHC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  endif()
  add_executable(replay_${t} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
  target_link_libraries(replay_${t} PRIVATE speechc_compiler)
  target_compile_definitions(replay_${t} PRIVATE SPEECHC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME fuzz_regress_${t}
    COMMAND replay_${t} ${CMAKE_SOURCE_DIR}/tests/fuzz/regress/${t}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endforeach()
