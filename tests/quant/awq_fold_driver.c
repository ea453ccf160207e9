/* awq_fold_driver MODEL IMATRIX ALPHA OUTDIR: applies AWQ's rescaling (stages/quant/awq.h) with a
 * fixed exponent ALPHA to every layer of MODEL, using the statistics of the importance-matrix
 * file IMATRIX, without quantizing, and writes each changed tensor as OUTDIR/<name>.f32 (float32
 * rows, GGUF order), for test_quant_calibrated.py to check that the folded model computes what the
 * original does. */
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "stages/quant/awq.h"
#include "stages/quant/imatrix_file.h"

static int write_floats(const char *dir, const char *name, const float *x, size_t n) {
    char *path = em_xasprintf("%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    free(path);
    int ok = f && fwrite(x, sizeof *x, n, f) == n;
    return (f && fclose(f) == 0 && ok) ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: awq_fold_driver MODEL IMATRIX ALPHA OUTDIR\n");
        return 1;
    }
    em_model *m;
    em_activation_stats *stats;
    em_status err = em_model_load(argv[1], &m);
    if (!err) err = em_imatrix_read(argv[2], &stats);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        return err->exit_code;
    }
    em_quant_plan plan = {.scheme = "Q8_0"}; /* every linear weight of the blocks */
    int rc = 0;
    for (int l = 0; l < m->config.n_layers && !rc; l++) {
        em_awq_layer a;
        err = em_awq_scale_layer(m, l, &plan, stats, (float)atof(argv[3]), false, 1, &a);
        if (err) {
            fprintf(stderr, "%s\n", err->message);
            return err->exit_code;
        }
        const em_layer_weights *L = &m->layers[l];
        const em_tensor *w[EM_AWQ_WEIGHTS] = {L->wq, L->wk, L->wv, L->w_gate, L->w_up, L->w_down};
        for (int i = 0; i < EM_AWQ_WEIGHTS && !rc; i++)
            if (a.w[i])
                rc = write_floats(argv[4], w[i]->name, a.w[i], (size_t)em_tensor_numel(w[i]));
        if (!rc && a.attn_norm)
            rc = write_floats(argv[4], L->attn_norm->name, a.attn_norm,
                              (size_t)L->attn_norm->shape[0]);
        if (!rc && a.ffn_norm)
            rc =
                write_floats(argv[4], L->ffn_norm->name, a.ffn_norm, (size_t)L->ffn_norm->shape[0]);
        printf("layer %d: alpha %g %g %g\n", l, a.alpha[0], a.alpha[1], a.alpha[2]);
        em_awq_layer_free(&a);
    }
    em_activation_stats_free(stats);
    em_model_free(m);
    return rc;
}
