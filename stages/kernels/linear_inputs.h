/* A look at the inputs of a forward's linear layers, for calibration (the calibrate stage's
 * per-channel activation statistics). A backend that offers it calls the observer once per layer
 * and site with the activations that the site's weights multiply, before the product; with no
 * observer set (the normal case) it costs one pointer test per site and layer.
 *
 * The activations x (T, K) of a site are given as a strided view, so that a backend can hand over
 * its buffers in whatever layout its products read them (row-major, or packed in panels of
 * tokens): token t at column k is
 *     x[(t / EM_LINEAR_PANEL) * panel_stride + (t % EM_LINEAR_PANEL) * token_stride
 *       + k * column_stride]. */
#ifndef EVALMESH_KERNELS_LINEAR_INPUTS_H
#define EVALMESH_KERNELS_LINEAR_INPUTS_H

#include <stddef.h>

/* Tokens per panel of the view (the CPU GEMM's panel). */
#define EM_LINEAR_PANEL 16

/* The sites of a Llama-family layer: the weights that read each one. */
typedef enum em_linear_site {
    EM_LINEAR_QKV,      /* attn_q, attn_k, attn_v: the attention norm's output (T, D) */
    EM_LINEAR_ATTN_OUT, /* attn_output: attention's output (T, n_heads * head_dim) */
    EM_LINEAR_GATE_UP,  /* ffn_gate, ffn_up: the MLP norm's output (T, D) */
    EM_LINEAR_DOWN,     /* ffn_down: the gated activation (T, ffn_dim) */
    EM_LINEAR_SITES,
} em_linear_site;

typedef struct em_linear_input {
    const float *x;
    int T, K; /* tokens, columns (input channels) */
    size_t panel_stride, token_stride, column_stride;
} em_linear_input;

static inline float em_linear_input_at(const em_linear_input *in, int t, int k) {
    return in->x[(size_t)(t / EM_LINEAR_PANEL) * in->panel_stride +
                 (size_t)(t % EM_LINEAR_PANEL) * in->token_stride + (size_t)k * in->column_stride];
}

typedef struct em_linear_observer {
    /* Called on the forward's thread, outside any parallel region, for every layer and site of
     * every window, in layer order; x is valid only during the call. */
    void (*observe)(void *user, int layer, em_linear_site site, const em_linear_input *x);
    void *user;
} em_linear_observer;

#endif
