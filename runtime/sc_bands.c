/* sc_bands.c — the band traits table (sc_bands.h). */
#include "sc_bands.h"

#include <string.h>

const sc_band_traits sc_band_table[SC_W_COUNT] = {
    /*             name    abi_name     block  block_bytes    linear cpu_group    cpu_group_bytes */
    [SC_W_F32]  = {"f32",  "SC_W_F32",  1,     4,             1,     0,           0},
    [SC_W_BF16] = {"bf16", "SC_W_BF16", 1,     2,             1,     0,           0},
    [SC_W_F16]  = {"f16",  "SC_W_F16",  1,     2,             0,     0,           0},
    [SC_W_Q8_0] = {"q8_0", "SC_W_Q8_0", SC_QK, SC_Q8_0_BLOCK, 1,     SC_Q8_GROUP, SC_Q8_GROUP_BYTES},
    [SC_W_Q4_0] = {"q4_0", "SC_W_Q4_0", SC_QK, SC_Q4_0_BLOCK, 1,     SC_Q4_GROUP, SC_Q4_GROUP_BYTES},
};

int sc_band_find(const char *name) {
  for (int w = 0; w < SC_W_COUNT; w++)
    if (name && !strcmp(sc_band_table[w].name, name)) return w;
  return -1;
}
