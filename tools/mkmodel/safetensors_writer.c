/* safetensors header writer (see safetensors_writer.h). */
#include "safetensors_writer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

bool st_write_header(FILE *f, const st_entry *entries, size_t n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, entries[i].name);
        cJSON_AddStringToObject(t, "dtype", entries[i].dtype);
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < entries[i].n_dims; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)entries[i].shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        offset += entries[i].nbytes;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return false;
    size_t len = strlen(json);
    uint64_t padded = (len + 7) / 8 * 8;
    bool ok = fwrite(&padded, 8, 1, f) == 1 && fwrite(json, 1, len, f) == len;
    for (size_t i = len; i < padded && ok; i++) ok = fputc(' ', f) != EOF;
    free(json);
    return ok;
}
