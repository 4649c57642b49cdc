/*
** Rotary position embedding tables, computed as Hugging Face transformers
** computes them: every step in fp32, then cos and sin rounded to bf16.
**
**   e_i        = fp32(2i) / fp32(head_dim)               i = 0 .. head_dim/2-1
**   inv_freq_i = 1 / fp32(theta ^ e_i)
**   llama3 scaling (when asked), element by element on inv_freq
**   angle      = fp32(p * inv_freq_i)
**   row p      = [bf16(cos(angle_0)) .. bf16(cos(angle_h-1)) | bf16(sin(angle_0)) ..]
**
** The table has shape (seq_len, head_dim): per position the cos of each of
** the head_dim/2 frequencies followed by their sin (rotate-half layout, as
** applied by out[i] = x[i]*cos[i] - x[i+h]*sin[i], out[i+h] = x[i]*sin[i] +
** x[i+h]*cos[i], h = head_dim/2).
*/
#ifndef GM_ROPE_H
#define GM_ROPE_H

#include "gm/bf16.h"
#include "gm/config.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* inv_freq[head_dim/2] for the given base and scaling (NULL: none). */
void gm_rope_inv_freq(float *inv_freq, int head_dim, double rope_base,
                      const gm_rope_scaling *scaling);

/*
** A fresh malloc'd (seq_len, head_dim) bf16 table in *table. head_dim must
** be even and positive, seq_len positive.
*/
int gm_rope_table(gm_bf16 **table, int seq_len, int head_dim, double rope_base,
                  const gm_rope_scaling *scaling, gm_status *st);

#ifdef __cplusplus
}
#endif

#endif
