# The command line against bad flags, bad checkpoints and damaged artifacts,
# plus one good build/inspect/run (tests/cli/test_cli.sh; bash, coreutils,
# sed, dd and cc; no Python).  Run from the source tree for tests/data.
add_test(NAME cli
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.sh $<TARGET_FILE:speechc>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# The hostile corpus (issue 12): one ctest case per tests/cli/hostile/*.sh,
# each a script over tests/cli/lib.sh like test_cli.sh.
file(GLOB HOSTILE_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cli/hostile/*.sh)
foreach(script ${HOSTILE_SCRIPTS})
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME hostile_${name} COMMAND bash ${script} $<TARGET_FILE:speechc>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endforeach()

# Speech out: build with speech_tokenizer/, tts to WAV / stdout, decode.
add_test(NAME cli_audio
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_audio.sh $<TARGET_FILE:speechc>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# Mimi: speechc encode against the package's codes, and its refusals.
add_test(NAME cli_mimi
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_mimi.sh $<TARGET_FILE:speechc>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
