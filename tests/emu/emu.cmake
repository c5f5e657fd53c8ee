# The CUDA emulator (tests/emu/cuda_emu.c): a CPU stand-in for libcuda.so.1
# that runs --target cuda models' kernels (their CUDA source compiled as C)
# with block and warp semantics, so CI checks the whole CUDA path (host
# code, runtime, graphs, kernel indexing) without a GPU.  x86-64 only.
# Built without sanitizers: it switches stacks under their feet.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_library(sc_cuda_emu SHARED ${CMAKE_SOURCE_DIR}/tests/emu/cuda_emu.c)
  target_compile_definitions(sc_cuda_emu PRIVATE SC_EMU_DIR="${CMAKE_SOURCE_DIR}/tests/emu")
  target_compile_options(sc_cuda_emu PRIVATE -fno-sanitize=all)
  target_link_options(sc_cuda_emu PRIVATE -fno-sanitize=all)
  target_link_libraries(sc_cuda_emu PRIVATE dl m)
  # The parity tests again, on --target cuda builds run by the emulator.
  foreach(t test_parity test_tts)
    add_test(NAME ${t}_cuda_emu COMMAND ${t} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${t}_cuda_emu PROPERTIES ENVIRONMENT
      "SPEECHC_TEST_TARGET=cuda;SPEECHC_LIBCUDA=$<TARGET_FILE:sc_cuda_emu>;SPEECHC_BIN=$<TARGET_FILE:speechc>")
  endforeach()
  set_property(TEST test_cuda APPEND PROPERTY ENVIRONMENT "SPEECHC_CUDA_EMU=$<TARGET_FILE:sc_cuda_emu>")
endif()
