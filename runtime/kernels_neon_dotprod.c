/*
 * kernels_neon_dotprod.c — kernels_neon.c built again with
 * -march=armv8.2-a+dotprod (CMakeLists.txt, scripts/neon.sh), so that its
 * integer dots use SDOT.  Chosen at run time only when the CPU reports
 * ASIMDDP; elsewhere (other targets, or built without dotprod) its table
 * is empty.
 */
#define SC_NEON_OPS sc_kern_neon_dotprod
#define SC_NEON_NAME "neon-dotprod"
#define SC_NEON_DOT 1
#include "kernels_neon.c"
