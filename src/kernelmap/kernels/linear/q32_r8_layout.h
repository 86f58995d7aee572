/* linear/q32_r8_layout.h — the byte geometry of the repacked layout "q32_r8" (weights/repack.py writes it; the
 * layout is described in full in linear/q32_r8_body.h), shared by the bodies that read it: linear/q32_r8_body.h
 * (decode rows) and linear/q32_gemm_body.h (prefill panels). fmt is a KL_Q32_* format of km_lanes.h.
 */
#ifndef KM_Q32_R8_LAYOUT_H
#define KM_Q32_R8_LAYOUT_H

#define KQR8_TILE(fmt) (16 * KL_Q32_WBLK(fmt))         /* bytes per tile: 8 rows x 2 blocks */
#define KQR8_QH(fmt) (KL_Q32_QH(fmt) >= 0)              /* 1: fifth-bit planes H0, H1 */
#define KQR8_OH(fmt) (32 + 32 * KL_Q32_HASMIN(fmt))     /* H0's offset in a tile (d: 0, m: 32) */
#define KQR8_ON(fmt) (KQR8_OH(fmt) + 64 * KQR8_QH(fmt)) /* the nibbles' offset */

#endif /* KM_Q32_R8_LAYOUT_H */
