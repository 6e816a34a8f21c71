/* nb_bf16: bf16 and fp16 conversions shared by the loader, kernels and engine.
 * fp32 -> bf16 is round-to-nearest-even, exactly as torch's .to(bfloat16). */
#ifndef NB_BF16_H
#define NB_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t nb_bf16;

static inline float nb_bf16_to_f32(nb_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline nb_bf16 nb_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet, keep sign */
        return (nb_bf16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (nb_bf16)(u >> 16);
}

/* Rounds an fp32 value to the nearest bf16 and back: the value a bf16
 * tensor would hold. */
static inline float nb_round_bf16(float f)
{
    return nb_bf16_to_f32(nb_f32_to_bf16(f));
}

/* IEEE half -> fp32, exact for every input including subnormals. */
static inline float nb_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ffu;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
