/* kernel_driver.c — run kernel-map variants on buffers read from a file; write what they wrote.
 *
 * The test harness (aarch64_harness.py) links this with generated call trampolines
 * (km_bench_t<i>(slots, ith, nth), kernelmap.bench.runner.trampoline_source) and a table
 * `km_driver_fns`, builds it for x86_64 (natively) and aarch64 (cross, run under qemu-aarch64) and
 * feeds both the same input file, so the two architectures run the same calls on the same bytes.
 *
 * Input (little-endian uint64 words): "KMDRV001", n_buffers, then per buffer: size, offset (the data
 * starts `offset` bytes past a 64-byte boundary), the bytes padded to 8; n_calls, then per call:
 * function index, nth, n_slots, per slot (kind, value) with kind 0 = value bits, 1 = pointer to buffer
 * `value`, 2 = NULL; n_out, the indices of the buffers to write out. Every call starts from the
 * buffers as read (restored before the call), runs ith = 0 .. nth-1 in order, checks the 64 guard
 * bytes on both sides of every buffer, then appends the out buffers' bytes to the output file.
 * Exit 0, or 2 with one line on stderr (bad input, guard bytes overwritten).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*km_driver_fn)(const uint64_t *s, int ith, int nth);
extern const km_driver_fn km_driver_fns[];
extern const int km_driver_nfns;

#define GUARD 64
#define GUARD_BYTE 0xA5

typedef struct {
    uint64_t size, offset;
    uint8_t *raw, *data, *pristine;
} buffer;

static FILE *in;

static void fail(const char *what, long long a, long long b) {
    fprintf(stderr, "kernel_driver: %s (%lld, %lld)\n", what, a, b);
    exit(2);
}

static uint64_t word(void) {
    uint64_t v;
    if (fread(&v, sizeof v, 1, in) != 1) fail("input file ends early", 0, 0);
    return v;
}

static int guards_ok(const buffer *b) {
    for (int i = 0; i < GUARD; i++)
        if (b->data[-1 - i] != GUARD_BYTE || b->data[b->size + (uint64_t)i] != GUARD_BYTE) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]);
        return 2;
    }
    in = fopen(argv[1], "rb");
    FILE *out = fopen(argv[2], "wb");
    if (!in || !out) fail("cannot open the input or output file", 0, 0);
    if (word() != UINT64_C(0x3130305652444d4b)) fail("bad magic", 0, 0); /* "KMDRV001" */
    const uint64_t nbuf = word();
    if (nbuf > 4096) fail("too many buffers", (long long)nbuf, 4096);
    buffer *bufs = calloc(nbuf ? nbuf : 1, sizeof *bufs);
    for (uint64_t k = 0; k < nbuf; k++) {
        buffer *b = &bufs[k];
        b->size = word();
        b->offset = word() % 64;
        if (b->size > (UINT64_C(1) << 32)) fail("buffer too large", (long long)k, (long long)b->size);
        b->raw = malloc(b->size + 2 * GUARD + 128);
        b->pristine = malloc(b->size + 8);
        if (!b->raw || !b->pristine) fail("out of memory", (long long)k, (long long)b->size);
        uint8_t *base = (uint8_t *)(((uintptr_t)b->raw + GUARD + 63) & ~(uintptr_t)63);
        b->data = base + b->offset;
        const uint64_t padded = (b->size + 7) & ~UINT64_C(7);
        if (fread(b->pristine, 1, padded, in) != padded) fail("buffer data ends early", (long long)k, 0);
    }
    const uint64_t ncalls = word();
    uint64_t slots[64];
    for (uint64_t c = 0; c < ncalls; c++) {
        const uint64_t fn = word(), nth = word(), nslots = word();
        if (fn >= (uint64_t)km_driver_nfns || nth < 1 || nth > 64 || nslots > 64) fail("bad call header", (long long)c, 0);
        for (uint64_t k = 0; k < nbuf; k++) {
            memset(bufs[k].data - GUARD, GUARD_BYTE, bufs[k].size + 2 * GUARD);
            memcpy(bufs[k].data, bufs[k].pristine, bufs[k].size);
        }
        for (uint64_t j = 0; j < nslots; j++) {
            const uint64_t kind = word(), value = word();
            if (kind == 1 && value >= nbuf) fail("slot names an unknown buffer", (long long)c, (long long)j);
            slots[j] = kind == 0 ? value : kind == 1 ? (uint64_t)(uintptr_t)bufs[value].data : 0;
        }
        for (uint64_t ith = 0; ith < nth; ith++) km_driver_fns[fn](slots, (int)ith, (int)nth);
        for (uint64_t k = 0; k < nbuf; k++)
            if (!guards_ok(&bufs[k])) fail("call wrote outside a buffer (call, buffer)", (long long)c, (long long)k);
        const uint64_t nout = word();
        for (uint64_t j = 0; j < nout; j++) {
            const uint64_t k = word();
            if (k >= nbuf) fail("unknown out buffer", (long long)c, (long long)k);
            if (fwrite(bufs[k].data, 1, bufs[k].size, out) != bufs[k].size) fail("cannot write output", (long long)c, 0);
        }
    }
    if (fclose(out) != 0) fail("cannot write output", 0, 0);
    return 0;
}
