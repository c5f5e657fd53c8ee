# The command line against bad flags, bad checkpoints and damaged artifacts,
# plus one good build/inspect/run (tests/cli/test_cli.sh; bash, coreutils,
# sed, dd and cc; no Python).  Run from the source tree for tests/data.
add_test(NAME cli
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.sh $<TARGET_FILE:speechc>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
