/* AMX tile set-up shared by the kernels on the tiles (attention_amx.c, gemv_amx.c): Linux's
 * permission for the tile state, and the one tile configuration they all use (8 tiles of 16
 * rows x 64 bytes). Empty where the compiler does not take AMX. */
#ifndef APPLIANCE_KERNELS_AMX_TILES_H
#define APPLIANCE_KERNELS_AMX_TILES_H

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tile_config;

/* Linux hands out the AMX tile state per process on request (once; racing callers agree) */
static inline int amx_permitted(void) {
    static volatile int state = 0; /* 0 unknown, 1 yes, -1 no */
    if (state == 0)
        state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
    return state == 1;
}

static inline void configure_tiles(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}

#endif /* AMX */
#endif
