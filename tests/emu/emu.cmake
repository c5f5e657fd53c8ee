# The CUDA emulator (tests/emu/cuda_emu.c): a CPU stand-in for libcuda.so.1
# that runs --target cuda models' kernels (their CUDA source compiled as C)
# with block and warp semantics, so CI checks the whole CUDA path (host
# code, runtime, graphs, kernel indexing) without a GPU.  x86-64 only.
# Built without sanitizers: it switches stacks under their feet.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_library(sc_cuda_emu SHARED ${CMAKE_SOURCE_DIR}/tests/emu/cuda_emu.c ${CMAKE_SOURCE_DIR}/tests/emu/emu_threads.c)
  target_compile_definitions(sc_cuda_emu PRIVATE SC_EMU_DIR="${CMAKE_SOURCE_DIR}/tests/emu")
  target_compile_options(sc_cuda_emu PRIVATE -fno-sanitize=all)
  target_link_options(sc_cuda_emu PRIVATE -fno-sanitize=all)
  target_link_libraries(sc_cuda_emu PRIVATE dl m)
  # The parity tests (and test_rows) again, on --target cuda builds run by the emulator
  # (test_gdn: the Gated DeltaNet hybrids, dense and MoE; test_batch: batched LM
  # decode; test_tts_batch: batched
  # Qwen3-TTS frames, a smaller set of requests).
  # No kernel cache: NVRTC runs every time, as on a fresh machine.
  foreach(t test_parity test_tts test_rows test_gdn test_batch test_tts_batch test_moshi)
    add_test(NAME ${t}_cuda_emu COMMAND ${t} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${t}_cuda_emu PROPERTIES ENVIRONMENT
      "SPEECHC_TEST_TARGET=cuda;SPEECHC_LIBCUDA=$<TARGET_FILE:sc_cuda_emu>;SPEECHC_BIN=$<TARGET_FILE:speechc>;SPEECHC_KERNEL_CACHE=off")
  endforeach()
  set_property(TEST test_cuda APPEND PROPERTY ENVIRONMENT "SPEECHC_CUDA_EMU=$<TARGET_FILE:sc_cuda_emu>")

  # The Metal stand-in (tests/emu/metal_emu.c): the runtime's Metal backend
  # over a CPU emulator of the Metal operations it uses, running --target
  # metal models' MSL compiled by clang++ over tests/emu/metal/metal_stdlib
  # (the MSL subset, with address spaces checked).  The parity tests again:
  # the dense LMs, rows placed per row, both Qwen3-TTS layouts, the Gated
  # DeltaNet hybrids, batched LM decode and batched Qwen3-TTS frames.
  add_library(sc_metal_emu SHARED ${CMAKE_SOURCE_DIR}/tests/emu/metal_emu.c ${CMAKE_SOURCE_DIR}/tests/emu/emu_threads.c)
  target_compile_definitions(sc_metal_emu PRIVATE SC_EMU_DIR="${CMAKE_SOURCE_DIR}/tests/emu")
  target_compile_options(sc_metal_emu PRIVATE -fno-sanitize=all)
  target_link_options(sc_metal_emu PRIVATE -fno-sanitize=all)
  target_link_libraries(sc_metal_emu PRIVATE dl Threads::Threads)
  set_property(TEST test_metal APPEND PROPERTY ENVIRONMENT "SPEECHC_METAL_EMU=$<TARGET_FILE:sc_metal_emu>")
  set_property(TEST cli APPEND PROPERTY ENVIRONMENT "SPEECHC_METAL_EMU=$<TARGET_FILE:sc_metal_emu>")
  foreach(t test_parity test_tts test_rows test_gdn test_batch test_tts_batch test_moshi)
    add_test(NAME ${t}_metal_emu COMMAND ${t} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${t}_metal_emu PROPERTIES ENVIRONMENT
      "SPEECHC_TEST_TARGET=metal;SPEECHC_LIBMETAL=$<TARGET_FILE:sc_metal_emu>;SPEECHC_BIN=$<TARGET_FILE:speechc>")
  endforeach()
endif()

# NVRTC and ptxas for the tests that build --target cuda: the machine's CUDA
# toolkit, or else the copies scripts/cuda_tools.sh fetched (scripts/deps.sh
# runs it), named to the tests through SPEECHC_NVRTC and SPEECHC_PTXAS.
# Asked at every configure, never cached: hiding the toolkit changes it.
execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/cuda_tools.sh --env
                RESULT_VARIABLE sc_cuda_tools_rc OUTPUT_VARIABLE sc_cuda_tools_env
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT sc_cuda_tools_rc EQUAL 0)
  message(WARNING "no NVRTC and ptxas: the CUDA target's tests will fail "
                  "(hint: scripts/cuda_tools.sh fetches them)")
elseif(sc_cuda_tools_env)
  message(STATUS "CUDA tests: NVRTC and ptxas of scripts/cuda_tools.sh (${sc_cuda_tools_env})")
  foreach(t test_cuda test_parity_cuda_emu test_tts_cuda_emu test_rows_cuda_emu test_gdn_cuda_emu
            test_batch_cuda_emu test_tts_batch_cuda_emu test_moshi_cuda_emu)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${sc_cuda_tools_env})
    endif()
  endforeach()
endif()
