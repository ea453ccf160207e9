/* ggml's lattice grids for the IQ tensor types: entry i is one grid point, its coordinates in the
 * bytes of the integer, lowest byte first (em_iq_grid_byte). The IQ2 grids hold 8 coordinates
 * from {8, 25, 43}, IQ3_XXS 4 from {4, 12, ..., 62}, IQ3_S 4 odd values 1..15, IQ1_S 8 signed
 * bytes from {-1, 0, 1}. */
#ifndef EVALMESH_IQ_GRIDS_H
#define EVALMESH_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t em_iq2xxs_grid[256];
extern const uint64_t em_iq2xs_grid[512];
extern const uint64_t em_iq2s_grid[1024];
extern const uint32_t em_iq3xxs_grid[256];
extern const uint32_t em_iq3s_grid[512];
extern const uint64_t em_iq1s_grid[2048];

/* Coordinate j of a grid point. */
static inline uint8_t em_iq_grid_byte(uint64_t point, int j) {
    return (uint8_t)(point >> (8 * j));
}

#endif
