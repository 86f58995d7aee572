/* main.c — standalone driver for a Kernelmap-generated model (no Python needed).
 *
 * Maps the packed weights (-w) and the model file (-g: tensors in the GGUF layout are read from it).
 * Reads whitespace-separated token ids from stdin, prefills them, then greedily decodes -n tokens
 * (argmax, ties to the lowest id) and prints the generated ids on one line; with --logits it prints
 * the logits of the last prompt position instead, one per line (--logits-hex: their IEEE bits as 8 hex
 * digits, to compare two builds byte for byte). Exit 1 on bad input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "km_model.h"

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [-w weights.bin] [-g model.gguf] [-t threads] [-c ctx] [-n n_predict] [--logits | --logits-hex] < token_ids.txt\n"
            "example: echo 2 818 5279 | %s -n 16\n",
            argv0, argv0);
}

static int64_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    const char *weights = "weights.bin";
    const char *gguf = "model.gguf";
    int threads = 2;
    long long ctx = 4096, n_predict = 32;
    int want_logits = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-w") && i + 1 < argc) weights = argv[++i];
        else if (!strcmp(argv[i], "-g") && i + 1 < argc) gguf = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) ctx = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_predict = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--logits")) want_logits = 1;
        else if (!strcmp(argv[i], "--logits-hex")) want_logits = 2;
        else {
            usage(argv[0]);
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0;
        }
    }
    size_t cap = 1024, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    long long v;
    while (ids && scanf("%lld", &v) == 1) {
        if (n == cap) {
            cap *= 2;
            int32_t *grown = realloc(ids, cap * sizeof *ids);
            if (!grown) break;
            ids = grown;
        }
        ids[n++] = (int32_t)v;
    }
    if (!ids || n == 0) {
        fprintf(stderr, "error: stdin: no token ids\n");
        return 1;
    }
    char err[512] = {0};
    km_model *m = km_model_create(weights, gguf, ctx, threads, err, sizeof err);
    if (!m) {
        fprintf(stderr, "error: %s: %s\n", weights, err);
        return 1;
    }
    int rc = km_model_prefill(m, ids, (int64_t)n, 0);
    if (rc != 0) {
        fprintf(stderr, "error: prompt: %s\n", rc == KM_ERR_CONTEXT ? "longer than the context" : "token id out of range");
        km_model_free(m);
        return 1;
    }
    int64_t vocab = km_model_n_vocab();
    if (want_logits) {
        const float *lg = km_model_logits(m);
        for (int64_t i = 0; i < vocab; i++) {
            if (want_logits == 2) {
                uint32_t bits;
                memcpy(&bits, &lg[i], sizeof bits);
                printf("%08x\n", (unsigned)bits);
            } else {
                printf("%.9g\n", lg[i]);
            }
        }
    } else {
        int64_t pos = (int64_t)n;
        for (long long i = 0; i < n_predict; i++) {
            int32_t tok = (int32_t)argmax(km_model_logits(m), vocab);
            printf(i ? " %d" : "%d", tok);
            if (i + 1 == n_predict || pos >= km_model_n_ctx(m)) break;
            if (km_model_decode(m, tok, pos++) != 0) break;
        }
        printf("\n");
    }
    km_model_free(m);
    free(ids);
    return 0;
}
