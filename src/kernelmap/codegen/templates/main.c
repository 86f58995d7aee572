/* main.c — standalone driver for a Kernelmap-generated model (no Python needed).
 *
 * Maps the packed weights (-w) and the model file (-g: tensors in the GGUF layout are read from it).
 * Reads whitespace-separated token ids from stdin, prefills them, then greedily decodes -n tokens
 * (argmax, ties to the lowest id; -n -1: until the context is full) and prints the generated ids on one line; with --logits it prints
 * the logits of the last prompt position instead, one per line (--logits-hex: their IEEE bits as 8 hex
 * digits, to compare two builds byte for byte); --steps-hex decodes greedily like the default and prints, per
 * position, the generated id and the IEEE bits of the logits it was chosen from, one line each ("id hex hex ..."):
 * the prompt's last position, then every decode step (two builds compared at every position). Without -c the
 * context is 4096 or the model's trained context when that is shorter. Exit 1 on bad input: an option value that
 * is not an integer in its range, or stdin text that is not a token id (refused, not truncated to the ids before it).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "km_model.h"

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [-w weights.bin] [-g model.gguf] [-t threads] [-c ctx] [-n n_predict]\n"
            "       [--logits | --logits-hex | --steps-hex] < token_ids.txt\n"
            "  -c: context length (default: 4096, or the model's trained context when shorter)\n"
            "  -n: tokens to generate (default 32; -1: until the context is full)\n"
            "example: echo 2 818 5279 | %s -n 16\n",
            argv0, argv0);
}

/* The integer in `text` (decimal, the whole string) if it lies in lo..hi; else a one-line error naming `what`. */
static int parse_int(const char *what, const char *text, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "error: %s: not an integer in %lld..%lld (found \"%s\")\n", what, lo, hi, text);
        return 0;
    }
    *out = v;
    return 1;
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
    long long threads = 2, ctx = 0, n_predict = 32; /* ctx 0: the smaller of 4096 and the trained context */
    int want_logits = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-w") && i + 1 < argc) weights = argv[++i];
        else if (!strcmp(argv[i], "-g") && i + 1 < argc) gguf = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            if (!parse_int("-t", argv[++i], 1, 512, &threads)) return 1; /* 512: the kernelmap CLI's cap */
        } else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            if (!parse_int("-c", argv[++i], 1, INT32_MAX, &ctx)) return 1;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            if (!parse_int("-n", argv[++i], -1, INT32_MAX, &n_predict)) return 1;
            if (n_predict == -1) n_predict = LLONG_MAX; /* llama.cpp's -1: the loop ends when the context is full */
        } else if (!strcmp(argv[i], "--logits")) want_logits = 1;
        else if (!strcmp(argv[i], "--logits-hex")) want_logits = 2;
        else if (!strcmp(argv[i], "--steps-hex")) want_logits = 3;
        else {
            usage(argv[0]);
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0;
        }
    }
    size_t cap = 1024, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    long long v;
    int got = EOF;
    while (ids && (got = scanf("%lld", &v)) == 1) {
        if (v < 0 || v > INT32_MAX) {
            fprintf(stderr, "error: stdin: token id %zu out of range (found %lld; expected 0..%d)\n", n + 1, v, INT32_MAX);
            free(ids);
            return 1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *grown = realloc(ids, cap * sizeof *ids);
            if (!grown) {
                fprintf(stderr, "error: stdin: out of memory reading token ids\n");
                free(ids);
                return 1;
            }
            ids = grown;
        }
        ids[n++] = (int32_t)v;
    }
    if (ids && got != EOF) { /* text that is not a token id: refused, not the ids before it run as the prompt */
        char bad[32] = {0};
        if (scanf("%31s", bad) != 1) bad[0] = '?';
        fprintf(stderr, "error: stdin: token id %zu is not an integer (found \"%s\")\n", n + 1, bad);
        free(ids);
        return 1;
    }
    if (!ids || n == 0) {
        fprintf(stderr, "error: stdin: no token ids\n");
        free(ids);
        return 1;
    }
    if (ctx == 0) ctx = km_model_n_ctx_train() < 4096 ? km_model_n_ctx_train() : 4096;
    char err[512] = {0};
    km_model *m = km_model_create(weights, gguf, ctx, (int)threads, err, sizeof err);
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
    if (want_logits == 1 || want_logits == 2) {
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
            const float *lg = km_model_logits(m);
            int32_t tok = (int32_t)argmax(lg, vocab);
            if (want_logits == 3) {
                printf("%d", tok);
                for (int64_t j = 0; j < vocab; j++) {
                    uint32_t bits;
                    memcpy(&bits, &lg[j], sizeof bits);
                    printf(" %08x", (unsigned)bits);
                }
                printf("\n");
            } else {
                printf(i ? " %d" : "%d", tok);
            }
            if (i + 1 == n_predict || pos >= km_model_n_ctx(m)) break;
            if (km_model_decode(m, tok, pos++) != 0) break;
        }
        if (want_logits != 3) printf("\n");
    }
    km_model_free(m);
    free(ids);
    return 0;
}
