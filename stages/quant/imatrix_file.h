/* Activation statistics (activation_stats.h) in llama.cpp's importance-matrix files.
 *
 * GGUF (llama-imatrix's current format): general.type "imatrix"; imatrix.datasets (string
 * array), imatrix.chunk_count and imatrix.chunk_size (u32: windows and tokens per window); per
 * entry, in the statistics' order, the F32 tensors "<name>.in_sum2" {columns, 1} (sum of x^2)
 * and "<name>.counts" {1, 1} (tokens; exact up to 2^24). evalmesh adds "<name>.in_sum_abs" and
 * "<name>.in_max_abs" {columns, 1} (sum and max of |x|), which llama.cpp's readers skip as they
 * skip every tensor of another suffix. Sums are rounded to float, as llama.cpp keeps them.
 *
 * Legacy .dat (llama-imatrix --output-format dat): int32 n_entries; per entry int32 name length,
 * the name, int32 ncall = ceil(count / chunk size), int32 nval = columns, float values[nval] =
 * (sum_x2 / count) * ncall (1 for an entry without tokens); then int32 the chunk count and int32
 * length + the dataset's name. It holds no token count: read back, an entry's count is its ncall
 * and its sum_x2 the stored values, so sum_x2 / count (what llama-quantize uses) is kept, and
 * window_len is 1 (a count is a chunk); written again, the file has the same bytes.
 *
 * Reading tells the formats apart by the GGUF magic. Every length and count is checked against
 * the file, so a damaged file is an error (exit 2 naming the file and what is wrong). */
#ifndef EVALMESH_QUANT_IMATRIX_FILE_H
#define EVALMESH_QUANT_IMATRIX_FILE_H

#include "util/error.h"
#include "stages/quant/activation_stats.h"

em_status em_imatrix_write_gguf(const em_activation_stats *s, const char *path);
/* Needs s->window_len > 0 (for ncall). */
em_status em_imatrix_write_dat(const em_activation_stats *s, const char *path);
/* Either format; *out is freed with em_activation_stats_free. */
em_status em_imatrix_read(const char *path, em_activation_stats **out);

#endif
