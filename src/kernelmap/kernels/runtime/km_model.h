/* km_model.h — the C API every generated model exports (the Python runtime and the standalone
 * executable both use it). A model is created from its weights files, then fed with prefill (many
 * tokens) and decode (one token) calls; logits of the last processed row stay valid until the next call.
 */
#ifndef KM_MODEL_H
#define KM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define KM_ERR_CONTEXT (-1) /* pos + n exceeds the KV capacity chosen at creation */
#define KM_ERR_TOKEN (-2)   /* a token id outside the vocabulary */
#define KM_ERR_SLOT (-3)    /* a KV slot outside 0..n_slots-1, or two batch rows on one slot */
#define KM_ERR_BATCH (-4)   /* batch rows outside 1..km_model_max_batch() (0: no batch entry) */
#define KM_ERR_MEMORY (-5)  /* out of memory allocating KV slots */
#define KM_ERR_RING (-6)    /* a rewind to positions whose keys a sliding-window ring already overwrote */

typedef struct km_model km_model;

typedef struct {
    const char *phase;
    const char *op;
    const char *provider;
    const char *variant;
} km_selection_row;

extern const km_selection_row km_selection[];
extern const int km_selection_count;

/* weights_path: the packed weights (weights.bin); gguf_path: the model file, whose tensors in the GGUF
 * layout are read from it directly (may be NULL when the model reads none). Each file is read once into
 * huge-page memory when the kernel offers transparent huge pages, else mapped (KERNELMAP_WEIGHTS=map / copy
 * forces one; model.c.in's km_map_file). */
km_model *km_model_create(const char *weights_path, const char *gguf_path, int64_t n_ctx, int n_threads,
                          char *err, size_t errlen);
void km_model_free(km_model *m);
int km_model_prefill(km_model *m, const int32_t *tokens, int64_t n, int64_t pos);
int km_model_decode(km_model *m, int32_t token, int64_t pos);
const float *km_model_logits(const km_model *m);
/* Bit 0: weights.bin is a huge-page copy; bit 1: the model file is (else a file mapping, or not used). */
int km_model_weights_copied(const km_model *m);
int64_t km_model_n_vocab(void);
int64_t km_model_n_ctx_train(void); /* the largest n_ctx km_model_create accepts */
int64_t km_model_max_rows(void);
int64_t km_model_n_ctx(const km_model *m);
int km_model_set_slots(km_model *m, int64_t n_slots);
int km_model_select_slot(km_model *m, int64_t slot);
int km_model_decode_batch(km_model *m, const int32_t *tokens, const int64_t *slots, const int64_t *positions,
                          int64_t n);
int64_t km_model_max_batch(void);
int km_model_profile(const km_model *m, int phase, double *out, int n);
void km_model_profile_reset(km_model *m);
int km_model_profiling(void);

#endif /* KM_MODEL_H */
