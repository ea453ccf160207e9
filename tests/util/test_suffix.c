/* util/suffix.h: em_ends_with. */
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "util/suffix.h"

static void test_ends_with(void) {
    CHECK(em_ends_with("model.safetensors", ".safetensors"));
    CHECK(em_ends_with("data.jsonl", ".jsonl"));
    CHECK(em_ends_with("x", ""));
    CHECK(em_ends_with("", ""));
    CHECK(!em_ends_with("model.gguf", ".safetensors"));
    CHECK(!em_ends_with("jsonl", ".jsonl")); /* the suffix is longer than the string */
    CHECK(!em_ends_with("data.jsonl.bak", ".jsonl"));
}

int main(void) {
    test_ends_with();
    return test_finish();
}
